/** `outbox-relay status` for a person: the readings, then the verdict with each finding's fix. */

import { STATUSES } from '../lifecycle/statuses.ts';
import { formatAge, formatBytes, formatPairs } from './format.ts';
import type { RelayStatus, StatusReport } from './status-report.ts';

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

const STATUS_ORDER = STATUSES;

/** The failover line (PostgreSQL 17+): the state, the standby's copy, a stall. */
function formatFailover(r: StatusReport): [string, string][] {
  const f = r.failover;
  if (!f || f.state === 'unsupported') return [];
  const copy = f.standbyCopy
    ? `; standby's copy: ${f.standbyCopy.synced ? 'synced' : 'not synced'}, ${f.standbyCopy.temporary ? 'TEMPORARY' : 'persistent'}`
    : '';
  const named = f.synchronizedStandbySlots.length ? f.synchronizedStandbySlots.join(', ') : '(not set)';
  return [
    ['failover', `${f.stalled ? 'STALLED, ' : ''}${f.state}${copy}; synchronized_standby_slots ${named}`],
  ];
}

export function formatStatus(r: StatusReport): string {
  const slot = r.slot.error
    ? `REFUSED: ${r.slot.error}`
    : r.slot.exists
      ? `${r.slot.active ? `active (pid ${r.slot.activePid})` : 'INACTIVE'}, wal_status ${r.slot.walStatus ?? '-'}${r.slot.invalidationReason ? ` (invalidated: ${r.slot.invalidationReason})` : ''}`
      : 'MISSING';
  const pairs: [string, string][] = [
    ['slot', `${r.slot.name}: ${slot}`],
    ['retained WAL', formatBytes(r.slot.retainedWalBytes)],
    ['lag', `${formatBytes(r.slot.lagBytes)} (confirmed ${r.slot.confirmedFlushLsn ?? '-'})`],
    ...formatFailover(r),
    ['publication', `${r.publication.name}: ${r.publication.ok ? 'ok' : `FAILED: ${r.publication.error}`}`],
    ...formatRelay(r.relay),
    // The preset's side table holds only the events that could not be published (none pending).
    r.sideTable
      ? [
          `events in ${r.sideTable}`,
          STATUS_ORDER.filter((s) => s !== 'pending')
            .map((s) => `${s} ${r.counts[s] ?? 0}`)
            .join(', '),
        ]
      : ['events', STATUS_ORDER.map((s) => `${s} ${r.counts[s] ?? 0}`).join(', ')],
    ...(r.sideTable ? [] : [['oldest pending', formatAge(r.oldestPendingAgeSeconds)] as [string, string]]),
    ['oldest failed', formatAge(r.oldestFailedAgeSeconds)],
    ['dead', String(r.dead)],
    ['parked aggregates', String(r.parkedAggregates)],
  ];
  return `${formatPairs(pairs)}\n\n${formatVerdict(r)}`;
}

/** The verdict and each finding with its fix, as `status` prints them. */
export function formatVerdict(r: Pick<StatusReport, 'verdict' | 'findings'>): string {
  const lines = r.findings.map(
    (f) =>
      `  - ${f.severity === 'warning' ? 'warning: ' : ''}${f.text}${f.fix ? `\n      fix: ${f.fix}` : ''}`,
  );
  return [r.verdict === 'healthy' ? 'healthy' : r.verdict.toUpperCase(), ...lines].join('\n');
}
