import { type ErrorCode, remediation } from '../errors.ts';
import type { FailoverFinding, FailoverState } from '../replication/failover-readiness.ts';
import { describeInvalidation } from '../store/slot-invalidation.ts';
import { formatAge, formatBytes } from './format.ts';
import { remedyFor } from './remedies.ts';

/** What `outbox-relay status` gathers (src/ops/status.ts); printed as is by --json. */
export interface StatusSnapshot {
  slot: {
    name: string;
    exists: boolean;
    active: boolean | null;
    activePid: number | null;
    walStatus: string | null;
    /**
     * Why PostgreSQL invalidated the slot (wal_status = lost): invalidation_reason on 17+ (e.g.
     * idle_timeout on 18), wal_removed on 14 – 16 (store/slot-invalidation.ts).
     */
    invalidationReason?: string | null;
    /** WAL the server keeps for the slot: current LSN − restart_lsn. */
    retainedWalBytes: number | null;
    /** WAL that may still be written before the slot risks invalidation; null: unlimited. */
    safeWalSizeBytes: number | null;
    /** --slot-critical-bytes: retained WAL from which the slot counts as at risk (0 = never). */
    criticalBytes: number;
    /** How far the confirmed position is behind: current LSN − confirmed_flush_lsn. */
    lagBytes: number | null;
    confirmedFlushLsn: string | null;
    /** The slot cannot be ours (e.g. SLOT_OTHER_DATABASE: the name is taken on another database). */
    error: string | null;
  };
  publication: { name: string; ok: boolean; error: string | null };
  /** What the active relay recorded (sql/000002_relay_state.sql); see RelayStatus. */
  relay: RelayStatus;
  counts: Record<string, number>;
  oldestPendingAgeSeconds: number | null;
  oldestFailedAgeSeconds: number | null;
  dead: number;
  parkedAggregates: number;
  /** Failed and dead events by topic and reason. */
  failing: FailingGroup[];
  /**
   * With --compat debezium: the side table the counts are of (`<table>_relay_failed`: the events
   * that could not be published; pending events are in the WAL only). null otherwise.
   */
  sideTable?: string | null;
  /** Failover readiness of the slot (replication/failover-readiness.ts); absent when not read. */
  failover?: FailoverStatus | null;
}

/** The slot's failover readiness as `status` shows it (PostgreSQL 17+). */
export interface FailoverStatus {
  state: FailoverState;
  /** outbox_slot_failover_ready: null when there is nothing to judge. */
  ready: boolean | null;
  /** Decoding is held by synchronized_standby_slots. */
  stalled: boolean;
  synchronizedStandbySlots: string[];
  /** The wait event of the relay's walsender (WaitForStandbyConfirmation: held by a standby). */
  walsenderWaitEvent: string | null;
  /** Read with --standby-url: the standby's copy of the slot (null: none there, or not read). */
  standbyCopy: { synced: boolean; temporary: boolean } | null;
  findings: FailoverFinding[];
}

/** The relay-state row of the slot, as `status` shows it. null fields: not recorded. */
export interface RelayStatus {
  /** Why the row could not be read (e.g. the table is missing: run migrate); null when it was. */
  error: string | null;
  /** A relay has recorded its state for this slot. */
  recorded: boolean;
  /** active, standby, broker-outage, database-outage, poison-position, starting, stopping, stopped. */
  state: string | null;
  detail: string | null;
  /** pid@host of the relay that wrote the row. */
  holder: string | null;
  sinceSeconds: number | null;
  heartbeatAgeSeconds: number | null;
  /** The heartbeat is older than RELAY_STALE_SECONDS: no relay is running (or it cannot reach the database). */
  stale: boolean;
  lastProgressAgeSeconds: number | null;
  confirmedLsn: string | null;
  lastError: string | null;
  lastErrorAgeSeconds: number | null;
  poisonLsn: string | null;
}

/** A relay rewrites its row every 5 s (STATE_HEARTBEAT_MS); this much silence means it is not running. */
export const RELAY_STALE_SECONDS = 30;

/** Failed or dead events of one topic and one reason (read by status.ts from last_error). */
export interface FailingGroup {
  status: 'failed' | 'dead';
  topic: string;
  aggregateType: string;
  /** e.g. UNKNOWN_TOPIC_OR_PARTITION; null when last_error names none. */
  reason: string | null;
  count: number;
}

/**
 * healthy: nothing to do; degraded: watch it (exit 0); unhealthy: act now (exit 69); unknown: the
 * status could not be read (the relay's own reading, http/health-watch.ts).
 */
export type HealthVerdict = 'healthy' | 'degraded' | 'unhealthy' | 'unknown';
export const HEALTH_VERDICTS: readonly HealthVerdict[] = ['healthy', 'degraded', 'unhealthy', 'unknown'];

/** Every problem the verdict knows; the label values of outbox_health_problems. */
export const PROBLEM_IDS = [
  'slot_refused',
  'slot_missing',
  'slot_lost',
  'slot_at_risk',
  'slot_inactive',
  'publication',
  'dead_events',
  'failed_events',
  'lag',
  'relay_state_unavailable',
  'relay_not_recorded',
  'relay_not_running',
  'poison_position',
  'broker_outage',
  'database_outage',
  'relay_stopped',
  'status_unreadable',
  'failover_stalled',
  'failover_not_ready',
  'phantom_risk',
] as const;
export type ProblemId = (typeof PROBLEM_IDS)[number];

export interface Finding {
  id: ProblemId;
  /** unhealthy: makes the verdict unhealthy; warning: degraded at worst. */
  severity: 'unhealthy' | 'warning';
  /** The line `status` prints. */
  text: string;
  /** What to do about it. */
  fix: string | null;
  /** The topics the problem is about (failed and dead events). */
  topics: string[];
}

/** The verdict part of a report: what `status --json`, /readyz, the console and the metrics share. */
export interface Verdict {
  verdict: HealthVerdict;
  /** No unhealthy finding (a degraded status is healthy: `status` exits 0). */
  healthy: boolean;
  /** The text of the unhealthy findings, as `status` has always listed them. */
  problems: string[];
  /** Every finding, unhealthy and warnings, with what to do. */
  findings: Finding[];
}

export interface StatusReport extends StatusSnapshot, Verdict {}

/** The verdict when the status itself could not be read (e.g. the database is unreachable). */
export function unreadableVerdict(error: string): Verdict {
  const text = `cannot read the status from PostgreSQL: ${error}`;
  return {
    verdict: 'unknown',
    healthy: false,
    problems: [text],
    findings: [
      {
        id: 'status_unreadable',
        severity: 'unhealthy',
        text,
        fix: 'check that PostgreSQL is up and reachable with the relay’s --database-url',
        topics: [],
      },
    ],
  };
}

/** Pending events older than this make the status degraded: they wait for something. */
export const LAG_WARN_SECONDS = 60;

/**
 * The one health verdict of a status snapshot: `outbox-relay status`, the body of /readyz, the
 * console's overview and the outbox_health metrics all show this (http/health-watch.ts).
 *
 * Unhealthy (exit non-zero) when:
 *  - the slot is missing (events committed now are not captured),
 *  - the slot is inactive (no relay streams from it; WAL accumulates),
 *  - its wal_status is 'lost' (invalidated: a gap needs a replay) or 'unreserved' (the next
 *    checkpoint may invalidate it),
 *  - the preflight/publication check fails,
 *  - there are dead events (nobody will retry them: resend or discard),
 *  - the relay's recorded state says it is not relaying: no row, a stale heartbeat (not
 *    running), a poison position, a broker or database outage, stopping or stopped,
 *  - decoding is held by synchronized_standby_slots (failover_stalled: a named standby is down).
 * Degraded (a warning, exit 0) when:
 *  - there are failed events (the sweeper retries them until they are dead),
 *  - the slot retains more WAL than --slot-critical-bytes,
 *  - the oldest pending event is older than LAG_WARN_SECONDS,
 *  - PostgreSQL 17+ with a standby: the slot would not survive a failover (failover_not_ready),
 *    or events may become phantoms at one (phantom_risk).
 */
export function evaluate(s: StatusSnapshot): StatusReport {
  const findings: Finding[] = [];
  const add = (id: ProblemId, text: string, fix: string | null, topics: string[] = [], warning = false) =>
    findings.push({ id, severity: warning ? 'warning' : 'unhealthy', text, fix, topics });
  const slot = s.slot.name;
  if (s.slot.error) add('slot_refused', s.slot.error, remedyOfCode(s.slot.error));
  else if (!s.slot.exists)
    add(
      'slot_missing',
      `slot ${slot} does not exist`,
      'start the relay (`outbox-relay run`): it creates the slot; events committed while it was missing are covered by slot recovery (docs/operations.md#lost-slot)',
    );
  else {
    if (s.slot.walStatus === 'lost')
      add(
        'slot_lost',
        `slot ${slot} is invalidated (wal_status = lost, invalidation_reason = ${s.slot.invalidationReason ?? 'wal_removed'}): ${describeInvalidation(s.slot.invalidationReason ?? null)}`,
        remediation.SLOT_INVALIDATED ?? null,
      );
    if (s.slot.walStatus === 'unreserved')
      add(
        'slot_at_risk',
        `slot ${slot} is about to be invalidated (wal_status = unreserved: the next checkpoint may remove WAL it needs)`,
        SLOT_AT_RISK_FIX,
      );
    else if (
      s.slot.walStatus !== 'lost' &&
      s.slot.criticalBytes > 0 &&
      (s.slot.retainedWalBytes ?? 0) >= s.slot.criticalBytes
    )
      add(
        'slot_at_risk',
        `slot ${slot} retains ${formatBytes(s.slot.retainedWalBytes)} of WAL (--slot-critical-bytes ${formatBytes(s.slot.criticalBytes)})${s.slot.safeWalSizeBytes === null ? '' : `; ${formatBytes(s.slot.safeWalSizeBytes)} more and it is invalidated`}`,
        SLOT_AT_RISK_FIX,
        [],
        true,
      );
    if (!s.slot.active)
      add(
        'slot_inactive',
        `slot ${slot} is not active: no relay is streaming from it`,
        `start a relay on this slot (\`outbox-relay run --slot ${slot}\`) or find why it stopped (its log; the relay line of \`status\`)`,
      );
  }
  if (!s.publication.ok)
    add('publication', `publication check failed: ${s.publication.error}`, remedyOfCode(s.publication.error));
  // The preset's events are in its side table: the commands that show and resolve them say so.
  const where = s.sideTable ? ` in the side table ${s.sideTable}` : '';
  const compat = s.sideTable ? ' --compat debezium' : '';
  const dead = s.failing.filter((g) => g.status === 'dead');
  if (s.dead > 0)
    add(
      'dead_events',
      `${s.dead} dead event(s)${where}${byTopic(dead)}: resend or discard them (outbox-relay events list --status dead${compat})`,
      failingFix(dead, 'dead', compat),
      topicsOf(dead),
    );
  const failed = s.failing.filter((g) => g.status === 'failed');
  const failedCount = s.counts.failed ?? 0;
  if (failedCount > 0)
    add(
      'failed_events',
      `${failedCount} failed event(s)${where}${byTopic(failed)}: retried with back-off until they are dead (outbox-relay events list --status failed${compat})`,
      failingFix(failed, 'failed', compat),
      topicsOf(failed),
      true,
    );
  const relayProblem = relayProblemOf(s.relay, slot);
  if (relayProblem) add(relayProblem.id, relayProblem.text, relayProblem.fix);
  if (s.oldestPendingAgeSeconds !== null && s.oldestPendingAgeSeconds > LAG_WARN_SECONDS)
    add(
      'lag',
      `events wait to be published: the oldest pending event is ${formatAge(s.oldestPendingAgeSeconds)} old`,
      "see the relay's state (the relay line of `status`, the console's Relay card) and its log: an outage, a slow broker or too little throughput holds them (docs/metrics.md, outbox_end_to_end_lag_seconds)",
      [],
      true,
    );
  for (const f of s.failover?.findings ?? []) add(f.id, f.text, f.fix, [], f.severity === 'warning');
  const problems = findings.filter((f) => f.severity === 'unhealthy').map((f) => f.text);
  const verdict: HealthVerdict = problems.length ? 'unhealthy' : findings.length ? 'degraded' : 'healthy';
  return { ...s, verdict, healthy: problems.length === 0, problems, findings };
}

const SLOT_AT_RISK_FIX =
  "find why the relay falls behind (the relay line, its log); if it cannot catch up in time, raise max_slot_wal_keep_size (ALTER SYSTEM SET max_slot_wal_keep_size = '…'; SELECT pg_reload_conf())";

/** The relay's remediation of the code an error text starts with (`[SLOT_OTHER_DATABASE] …`). */
function remedyOfCode(text: string | null): string | null {
  const code = text ? /\[([A-Z_]+)\]/.exec(text)?.[1] : undefined;
  return code ? (remediation[code as ErrorCode] ?? null) : null;
}

function topicsOf(groups: readonly FailingGroup[]): string[] {
  return [...new Set(groups.map((g) => g.topic))];
}

/** ` (outbox.event.Missing: UNKNOWN_TOPIC_OR_PARTITION ×2, …)`, or nothing when none was read. */
function byTopic(groups: readonly FailingGroup[]): string {
  if (!groups.length) return '';
  return ` (${groups.map((g) => `${g.topic}: ${g.reason ?? 'unknown reason'}${g.count > 1 ? ` ×${g.count}` : ''}`).join(', ')})`;
}

/** Each topic's fix for its reason (remedies.ts), then how to send the events again. */
function failingFix(groups: readonly FailingGroup[], status: 'failed' | 'dead', flags: string): string {
  const fixes = [...new Set(groups.map((g) => `${g.topic}: ${remedyFor(g.reason, g.topic).fix}`))];
  const types = [...new Set(groups.map((g) => g.aggregateType))];
  const resend = `outbox-relay events resend --filter --status ${status}${types.length === 1 ? ` --aggregate-type ${types[0]}` : ''}${flags}`;
  return `${fixes.join('; ')}${fixes.length ? '; then ' : ''}${status === 'dead' ? `\`${resend}\` (or discard them)` : `\`${resend}\` to retry now rather than at the next back-off`}`;
}

function relayProblemOf(
  r: RelayStatus,
  slot: string,
): { id: ProblemId; text: string; fix: string | null } | null {
  const start = `start the relay on this slot (\`outbox-relay run --slot ${slot}\`)`;
  if (r.error)
    return {
      id: 'relay_state_unavailable',
      text: `relay state unavailable: ${r.error}`,
      fix: 'run `outbox-relay migrate` (it creates the relay-state table), or grant this role SELECT on it, as the error says',
    };
  if (!r.recorded)
    return {
      id: 'relay_not_recorded',
      text: `no relay has recorded its state for slot ${slot}: none has run here yet`,
      fix: start,
    };
  if (r.stale)
    return {
      id: 'relay_not_running',
      text: `no relay is running for slot ${slot}: its heartbeat is ${formatAge(r.heartbeatAgeSeconds)} old (last recorded state: ${r.state})`,
      fix: `${start}, or find why it cannot reach the database`,
    };
  const error = r.lastError ? `; last error: ${r.lastError}` : '';
  switch (r.state) {
    case 'poison-position':
      return {
        id: 'poison_position',
        text: `the relay is stuck: ${r.detail ?? `poison position at ${r.poisonLsn}`} — see docs/operations.md#poison-position`,
        fix: remediation.POISON_POSITION ?? null,
      };
    case 'broker-outage':
      return {
        id: 'broker_outage',
        text: `broker outage for ${formatAge(r.sinceSeconds)}${error}`,
        fix: remediation.BROKER_UNAVAILABLE ?? null,
      };
    case 'database-outage':
      return {
        id: 'database_outage',
        text: `the relay cannot stream from the database (for ${formatAge(r.sinceSeconds)})${error}`,
        fix: remediation.DATABASE_UNAVAILABLE ?? null,
      };
    case 'stopping':
    case 'stopped':
      return {
        id: 'relay_stopped',
        text: `the relay is ${r.state} (for ${formatAge(r.sinceSeconds)})`,
        fix: start,
      };
    default:
      return null;
  }
}

/**
 * The verdict as the relay last read it, and when (http/health-watch.ts reads it; /readyz's body,
 * the console's overview and the outbox_health metrics show it).
 */
export interface HealthReading extends Verdict {
  /** ms since the epoch of the reading; null before the first one finished. */
  checkedAt: number | null;
  /** The whole report (null before the first reading, or when the status could not be read). */
  report: StatusReport | null;
}

/** Where the console reads the verdict (the relay's HealthWatch). */
export interface HealthSource {
  readonly current: HealthReading;
  /** The reading once the relay's state changes so far are in it (http/health-watch.ts). */
  settled(): Promise<HealthReading>;
}
