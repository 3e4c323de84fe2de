import type pg from 'pg';
import { errorMessage, isRelayError } from '../errors.ts';
import { checkDatabase } from '../replication/preflight.ts';
import { qualified } from '../store/sql-ident.ts';
import { readSlot } from '../sweeper/slot-watch.ts';
import type { StatusSnapshot } from './status-report.ts';

export interface StatusTarget {
  schema: string;
  table: string;
  publication: string;
  slot: string;
}

/** Reads the slot, the preflight checks and the outbox counts; read-only, safe beside a running relay. */
export async function readStatus(db: pg.ClientBase, t: StatusTarget): Promise<StatusSnapshot> {
  const slot = await readSlot(db, t.slot);
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
  return {
    slot: {
      name: t.slot,
      exists: !!slot,
      active: slot?.active ?? null,
      activePid: slot?.activePid ?? null,
      walStatus: slot?.walStatus ?? null,
      // Unknown (not 0) once the slot is invalidated and its positions are gone.
      retainedWalBytes: slot?.restartLsn ? slot.retainedBytes : null,
      lagBytes: slot?.confirmedFlushLsn ? slot.confirmedLagBytes : null,
      confirmedFlushLsn: slot?.confirmedFlushLsn ?? null,
    },
    publication: { name: t.publication, ok: publicationError === null, error: publicationError },
    counts,
    oldestPendingAgeSeconds: oldestPending,
    oldestFailedAgeSeconds: oldestFailed,
    dead: counts.dead ?? 0,
    parkedAggregates,
  };
}
