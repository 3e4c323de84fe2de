import { formatAge, formatBytes, formatPairs } from './format.ts';

/** What `outbox-relay status` gathers (src/ops/status.ts); printed as is by --json. */
export interface StatusSnapshot {
  slot: {
    name: string;
    exists: boolean;
    active: boolean | null;
    activePid: number | null;
    walStatus: string | null;
    /** WAL the server keeps for the slot: current LSN − restart_lsn. */
    retainedWalBytes: number | null;
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

export interface StatusReport extends StatusSnapshot {
  healthy: boolean;
  problems: string[];
}

/**
 * Something is wrong (exit non-zero) when:
 *  - the slot is missing (events committed now are not captured),
 *  - the slot is inactive (no relay streams from it; WAL accumulates),
 *  - its wal_status is 'lost' (invalidated: a gap needs a replay),
 *  - the preflight/publication check fails,
 *  - there are dead events (nobody will retry them: resend or discard),
 *  - the relay's recorded state says it is not relaying: no row, a stale heartbeat (not
 *    running), a poison position, a broker or database outage, stopping or stopped.
 */
export function evaluate(s: StatusSnapshot): StatusReport {
  const problems: string[] = [];
  if (s.slot.error) problems.push(s.slot.error);
  else if (!s.slot.exists) problems.push(`slot ${s.slot.name} does not exist`);
  else {
    if (s.slot.walStatus === 'lost') problems.push(`slot ${s.slot.name} is invalidated (wal_status = lost)`);
    if (!s.slot.active) problems.push(`slot ${s.slot.name} is not active: no relay is streaming from it`);
  }
  if (!s.publication.ok) problems.push(`publication check failed: ${s.publication.error}`);
  if (s.dead > 0)
    problems.push(`${s.dead} dead event(s): resend or discard them (outbox-relay events list --status dead)`);
  const relayProblem = relayProblemOf(s.relay, s.slot.name);
  if (relayProblem) problems.push(relayProblem);
  return { ...s, healthy: problems.length === 0, problems };
}

function relayProblemOf(r: RelayStatus, slot: string): string | null {
  if (r.error) return `relay state unavailable: ${r.error}`;
  if (!r.recorded) return `no relay has recorded its state for slot ${slot}: none has run here yet`;
  if (r.stale)
    return `no relay is running for slot ${slot}: its heartbeat is ${formatAge(r.heartbeatAgeSeconds)} old (last recorded state: ${r.state})`;
  const error = r.lastError ? `; last error: ${r.lastError}` : '';
  switch (r.state) {
    case 'poison-position':
      return `the relay is stuck: ${r.detail ?? `poison position at ${r.poisonLsn}`} — see docs/operations.md#poison-position`;
    case 'broker-outage':
      return `broker outage for ${formatAge(r.sinceSeconds)}${error}`;
    case 'database-outage':
      return `the relay cannot stream from the database (for ${formatAge(r.sinceSeconds)})${error}`;
    case 'stopping':
    case 'stopped':
      return `the relay is ${r.state} (for ${formatAge(r.sinceSeconds)})`;
    default:
      return null;
  }
}

function formatRelay(r: RelayStatus): [string, string][] {
  if (r.error) return [['relay', `UNKNOWN: ${r.error}`]];
  if (!r.recorded) return [['relay', 'no state recorded']];
  const state = r.stale ? `NOT RUNNING (last recorded ${r.state})` : r.state!;
  return [
    [
      'relay',
      `${state} for ${formatAge(r.sinceSeconds)} (${r.holder}, heartbeat ${formatAge(r.heartbeatAgeSeconds)} ago)`,
    ],
    ...(r.detail ? [['relay detail', r.detail] as [string, string]] : []),
    ['last progress', r.lastProgressAgeSeconds === null ? '-' : `${formatAge(r.lastProgressAgeSeconds)} ago`],
    ['last error', r.lastError === null ? '-' : `${r.lastError} (${formatAge(r.lastErrorAgeSeconds)} ago)`],
  ];
}

const STATUS_ORDER = ['pending', 'published', 'failed', 'dead', 'parked', 'discarded'];

export function formatStatus(r: StatusReport): string {
  const slot = r.slot.error
    ? `REFUSED: ${r.slot.error}`
    : r.slot.exists
      ? `${r.slot.active ? `active (pid ${r.slot.activePid})` : 'INACTIVE'}, wal_status ${r.slot.walStatus ?? '-'}`
      : 'MISSING';
  const pairs: [string, string][] = [
    ['slot', `${r.slot.name}: ${slot}`],
    ['retained WAL', formatBytes(r.slot.retainedWalBytes)],
    ['lag', `${formatBytes(r.slot.lagBytes)} (confirmed ${r.slot.confirmedFlushLsn ?? '-'})`],
    ['publication', `${r.publication.name}: ${r.publication.ok ? 'ok' : `FAILED: ${r.publication.error}`}`],
    ...formatRelay(r.relay),
    ['events', STATUS_ORDER.map((s) => `${s} ${r.counts[s] ?? 0}`).join(', ')],
    ['oldest pending', formatAge(r.oldestPendingAgeSeconds)],
    ['oldest failed', formatAge(r.oldestFailedAgeSeconds)],
    ['dead', String(r.dead)],
    ['parked aggregates', String(r.parkedAggregates)],
  ];
  const verdict = r.healthy ? 'healthy' : `UNHEALTHY\n${r.problems.map((p) => `  - ${p}`).join('\n')}`;
  return `${formatPairs(pairs)}\n\n${verdict}`;
}
