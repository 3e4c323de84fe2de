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
  };
  publication: { name: string; ok: boolean; error: string | null };
  counts: Record<string, number>;
  oldestPendingAgeSeconds: number | null;
  oldestFailedAgeSeconds: number | null;
  dead: number;
  parkedAggregates: number;
}

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
 *  - there are dead events (nobody will retry them: resend or discard).
 */
export function evaluate(s: StatusSnapshot): StatusReport {
  const problems: string[] = [];
  if (!s.slot.exists) problems.push(`slot ${s.slot.name} does not exist`);
  else {
    if (s.slot.walStatus === 'lost') problems.push(`slot ${s.slot.name} is invalidated (wal_status = lost)`);
    if (!s.slot.active) problems.push(`slot ${s.slot.name} is not active: no relay is streaming from it`);
  }
  if (!s.publication.ok) problems.push(`publication check failed: ${s.publication.error}`);
  if (s.dead > 0)
    problems.push(`${s.dead} dead event(s): resend or discard them (outbox-relay events list --status dead)`);
  return { ...s, healthy: problems.length === 0, problems };
}

const STATUS_ORDER = ['pending', 'published', 'failed', 'dead', 'parked', 'discarded'];

export function formatStatus(r: StatusReport): string {
  const slot = r.slot.exists
    ? `${r.slot.active ? `active (pid ${r.slot.activePid})` : 'INACTIVE'}, wal_status ${r.slot.walStatus ?? '-'}`
    : 'MISSING';
  const pairs: [string, string][] = [
    ['slot', `${r.slot.name}: ${slot}`],
    ['retained WAL', formatBytes(r.slot.retainedWalBytes)],
    ['lag', `${formatBytes(r.slot.lagBytes)} (confirmed ${r.slot.confirmedFlushLsn ?? '-'})`],
    ['publication', `${r.publication.name}: ${r.publication.ok ? 'ok' : `FAILED: ${r.publication.error}`}`],
    ['events', STATUS_ORDER.map((s) => `${s} ${r.counts[s] ?? 0}`).join(', ')],
    ['oldest pending', formatAge(r.oldestPendingAgeSeconds)],
    ['oldest failed', formatAge(r.oldestFailedAgeSeconds)],
    ['dead', String(r.dead)],
    ['parked aggregates', String(r.parkedAggregates)],
  ];
  const verdict = r.healthy ? 'healthy' : `UNHEALTHY\n${r.problems.map((p) => `  - ${p}`).join('\n')}`;
  return `${formatPairs(pairs)}\n\n${verdict}`;
}
