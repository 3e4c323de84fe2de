import type pg from 'pg';
import { errorMessage, isRelayError } from '../errors.ts';
import { checkDatabase } from '../replication/preflight.ts';
import { qualified } from '../store/sql-ident.ts';
import type { StatusSnapshot } from './status-report.ts';

export interface StatusTarget {
  schema: string;
  table: string;
  publication: string;
  slot: string;
}

/** Reads the slot, the preflight checks and the outbox counts; read-only, safe beside a running relay. */
export async function readStatus(db: pg.ClientBase, t: StatusTarget): Promise<StatusSnapshot> {
  const slot = (
    await db.query<{
      active: boolean;
      active_pid: number | null;
      wal_status: string | null;
      retained: string | null;
      lag: string | null;
      confirmed: string | null;
    }>(
      `SELECT active, active_pid, wal_status,
              pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::text AS retained,
              pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::text AS lag,
              confirmed_flush_lsn::text AS confirmed
         FROM pg_replication_slots WHERE slot_name = $1`,
      [t.slot],
    )
  ).rows[0];
  let publicationError: string | null = null;
  try {
    await checkDatabase(db, t);
  } catch (e) {
    publicationError = isRelayError(e) ? `[${e.code}] ${e.message}` : errorMessage(e);
  }
  const table = qualified(t.schema, t.table);
  const counts: Record<string, number> = {};
  let oldestPending: number | null = null;
  let oldestFailed: number | null = null;
  let parkedAggregates = 0;
  // A missing table is reported by the preflight check above; the counts then stay empty.
  if (!publicationError?.includes('OUTBOX_TABLE_MISSING')) {
    const byStatus = await db.query<{ status: string; n: string; oldest: string | null }>(
      `SELECT status, count(*)::text AS n, extract(epoch FROM now() - min(created_at))::text AS oldest
         FROM ${table} GROUP BY status`,
    );
    for (const r of byStatus.rows) {
      counts[r.status] = Number(r.n);
      if (r.status === 'pending') oldestPending = Number(r.oldest);
      if (r.status === 'failed') oldestFailed = Number(r.oldest);
    }
    const parked = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM ${table} WHERE status = 'parked') p`,
    );
    parkedAggregates = Number(parked.rows[0]!.n);
  }
  const num = (v: string | null | undefined) => (v === null || v === undefined ? null : Number(v));
  return {
    slot: {
      name: t.slot,
      exists: !!slot,
      active: slot?.active ?? null,
      activePid: slot?.active_pid ?? null,
      walStatus: slot?.wal_status ?? null,
      retainedWalBytes: num(slot?.retained),
      lagBytes: num(slot?.lag),
      confirmedFlushLsn: slot?.confirmed ?? null,
    },
    publication: { name: t.publication, ok: publicationError === null, error: publicationError },
    counts,
    oldestPendingAgeSeconds: oldestPending,
    oldestFailedAgeSeconds: oldestFailed,
    dead: counts.dead ?? 0,
    parkedAggregates,
  };
}
