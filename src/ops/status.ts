import type pg from 'pg';
import { withPresetTable } from '../compat/facts.ts';
import { operatorPresetOf } from '../compat/presets.ts';
import { errorMessage, isRelayError } from '../errors.ts';
import type { OperatorEvents } from '../lifecycle/operator-events.ts';
import { readFailover } from '../replication/failover.ts';
import { checkDatabase } from '../replication/preflight.ts';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { MIGRATE_HOLDER, readRelayState, relayStateTable } from '../store/relay-state.ts';
import { readSlot, type SlotReading } from '../sweeper/slot-watch.ts';
import { type EventsTarget, topicOfEvents } from './events.ts';
import { reasonOf } from './remedies.ts';
import {
  type FailingGroup,
  type FailoverStatus,
  RELAY_STALE_SECONDS,
  type RelayStatus,
  type StatusSnapshot,
} from './status-report.ts';

export interface StatusTarget extends EventsTarget {
  publication: string;
  /** Retained WAL at which the slot counts as at risk (--slot-critical-bytes; 0 = never). */
  slotCriticalBytes?: number;
  /** --standby-url: the standby whose copy of the slot says whether a failover keeps it. */
  standbyUrl?: string;
}

/** At most this many (status, aggregate type, event type, error) groups are read for the topics. */
const FAILING_GROUPS_READ = 200;

/**
 * Reads the slot, the preflight checks, the relay's recorded state and the outbox counts;
 * read-only, safe beside a running relay. `publishedCount: false` (the health watch) leaves
 * published out of the counts: the verdict does not need it, and counting it scans the table. A slot of this name on another database is reported
 * (by the preflight check, naming both databases) and never read as ours.
 */
export async function readStatus(
  db: pg.ClientBase,
  t: StatusTarget,
  o: { publishedCount?: boolean } = {},
): Promise<StatusSnapshot> {
  let slot: SlotReading | null = null;
  let slotError: string | null = null;
  let publicationError: string | null = null;
  const describe = (e: unknown) => (isRelayError(e) ? `[${e.code}] ${e.message}` : errorMessage(e));
  try {
    slot = await readSlot(db, t.slot);
  } catch (e) {
    if (!isRelayError(e)) throw e;
    slotError = describe(e);
  }
  try {
    await checkDatabase(db, withPresetTable(t));
  } catch (e) {
    publicationError = describe(e);
  }
  // The preflight's last check is the slot's: listed once, under the slot.
  if (publicationError === slotError) publicationError = null;
  const relay = await readRelay(db, t);
  const preset = operatorPresetOf(t);
  const events = preset.events;
  let counts: Record<string, number> = {};
  let oldestPending: number | null = null;
  let oldestFailed: number | null = null;
  let parkedAggregates = 0;
  let failing: FailingGroup[] = [];
  // A missing table is reported by the preflight check above; the counts then stay empty.
  if (!publicationError?.includes('OUTBOX_TABLE_MISSING')) {
    const c = await events.statusCounts(db, { published: o.publishedCount ?? true }).catch((e) => {
      // The preset's side table not migrated yet: the relay line says so (run migrate).
      if (preset.sideTable && sqlStateOf(e) === SqlState.UNDEFINED_TABLE) return null;
      throw e;
    });
    if (c) {
      counts = c.counts;
      oldestPending = c.oldestPendingAgeSeconds;
      oldestFailed = c.oldestFailedAgeSeconds;
      parkedAggregates = c.parkedAggregates;
      if ((counts.failed ?? 0) + (counts.dead ?? 0) > 0) failing = await readFailing(db, events, t);
    }
  }
  return {
    slot: {
      name: t.slot,
      exists: !!slot,
      active: slot?.active ?? null,
      activePid: slot?.activePid ?? null,
      walStatus: slot?.walStatus ?? null,
      invalidationReason: slot?.invalidationReason ?? null,
      // Unknown (not 0) once the slot is invalidated and its positions are gone.
      retainedWalBytes: slot?.restartLsn ? slot.retainedBytes : null,
      safeWalSizeBytes: slot?.safeWalSizeBytes ?? null,
      criticalBytes: t.slotCriticalBytes ?? 0,
      lagBytes: slot?.confirmedFlushLsn ? slot.confirmedLagBytes : null,
      confirmedFlushLsn: slot?.confirmedFlushLsn ?? null,
      error: slotError,
    },
    publication: { name: t.publication, ok: publicationError === null, error: publicationError },
    relay,
    counts,
    oldestPendingAgeSeconds: oldestPending,
    oldestFailedAgeSeconds: oldestFailed,
    dead: counts.dead ?? 0,
    parkedAggregates,
    failing,
    sideTable: preset.sideTable ? events.table : null,
    failover: await readFailoverStatus(db, t),
  };
}

/** The slot's failover readiness; null when the server cannot say (e.g. a role that may not read the settings). */
async function readFailoverStatus(db: pg.ClientBase, t: StatusTarget): Promise<FailoverStatus | null> {
  try {
    const { primary, standby, report } = await readFailover(db, t.slot, t.standbyUrl);
    return {
      state: report.state,
      ready: report.ready,
      stalled: report.stalled,
      synchronizedStandbySlots: primary.synchronizedStandbySlots,
      walsenderWaitEvent: primary.walsenderWaitEvent,
      standbyCopy: standby?.slot ? { synced: standby.slot.synced, temporary: standby.slot.temporary } : null,
      findings: report.findings,
    };
  } catch {
    return null;
  }
}

/**
 * Failed and dead events by topic and reason (the reason from last_error). The topic is not a
 * column: it is routed again from the aggregate and event type, as the relay routed it.
 */
async function readFailing(
  db: pg.ClientBase,
  events: OperatorEvents,
  t: StatusTarget,
): Promise<FailingGroup[]> {
  const rows = await events.failingGroups(db, FAILING_GROUPS_READ);
  const topicOf = topicOfEvents(t);
  const groups = new Map<string, FailingGroup>();
  for (const r of rows) {
    let topic: string;
    try {
      topic = topicOf(r.aggregate_type, r.event_type);
    } catch {
      topic = `(no topic for aggregate type ${JSON.stringify(r.aggregate_type)})`;
    }
    const reason = reasonOf(r.last_error);
    const key = `${r.status}\0${topic}\0${reason}`;
    const g = groups.get(key);
    if (g) g.count += Number(r.n);
    else
      groups.set(key, {
        status: r.status,
        topic,
        aggregateType: r.aggregate_type,
        reason,
        count: Number(r.n),
      });
  }
  return [...groups.values()];
}

async function readRelay(db: pg.ClientBase, t: StatusTarget): Promise<RelayStatus> {
  const none: RelayStatus = {
    error: null,
    recorded: false,
    state: null,
    detail: null,
    holder: null,
    sinceSeconds: null,
    heartbeatAgeSeconds: null,
    stale: false,
    lastProgressAgeSeconds: null,
    confirmedLsn: null,
    lastError: null,
    lastErrorAgeSeconds: null,
    poisonLsn: null,
  };
  let r: Awaited<ReturnType<typeof readRelayState>>;
  try {
    r = await readRelayState(db, relayStateTable(t.schema, t.table), t.slot);
  } catch (e) {
    const code = sqlStateOf(e);
    // Not migrated yet, or the role may not read it. Either way status still reports the rest.
    if (code !== SqlState.UNDEFINED_TABLE && code !== SqlState.INSUFFICIENT_PRIVILEGE) throw e;
    const fix =
      code === SqlState.UNDEFINED_TABLE
        ? ' (run `outbox-relay migrate`)'
        : ` (GRANT SELECT ON ${t.schema}.${t.table}_relay_state)`;
    return { ...none, error: `${errorMessage(e)}${fix}` };
  }
  // The row migrate inserts: no relay has written it yet.
  if (!r || r.holder === MIGRATE_HOLDER) return none;
  return {
    error: null,
    recorded: true,
    state: r.state,
    detail: r.detail,
    holder: r.holder,
    sinceSeconds: r.sinceAgeSeconds,
    heartbeatAgeSeconds: r.heartbeatAgeSeconds,
    stale: r.heartbeatAgeSeconds > RELAY_STALE_SECONDS,
    lastProgressAgeSeconds: r.progressAgeSeconds,
    confirmedLsn: r.confirmedLsn,
    lastError: r.lastError,
    lastErrorAgeSeconds: r.errorAgeSeconds,
    poisonLsn: r.poisonLsn,
  };
}
