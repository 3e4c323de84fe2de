import type pg from 'pg';
import { qualified } from '../store/sql-ident.ts';

const keyOf = (aggregateType: string, aggregateId: string) => `${aggregateType}\u0000${aggregateId}`;

/**
 * Strict ordering: aggregates whose head event failed, so later events of the same
 * aggregate must be parked behind it. Kept in memory (checked per event, no database
 * round trip) and reloaded from the table when a session starts, so a restart knows
 * what was blocked before.
 *
 * A park is decided synchronously in the stream and written to the table later; the
 * sweeper may only unblock an aggregate when no parked row is left in the table AND no
 * park decision is still unwritten (`pendingParks`), or a parked event could be stranded.
 */
export class BlockedAggregates {
  readonly #blocked = new Set<string>();
  readonly #pendingParks = new Map<string, number>();

  get size(): number {
    return this.#blocked.size;
  }

  has(aggregateType: string, aggregateId: string): boolean {
    return this.#blocked.has(keyOf(aggregateType, aggregateId));
  }

  block(aggregateType: string, aggregateId: string): void {
    this.#blocked.add(keyOf(aggregateType, aggregateId));
  }

  /** The stream decided to park an event of this aggregate; its row is not written yet. */
  parkDecided(aggregateType: string, aggregateId: string): void {
    const k = keyOf(aggregateType, aggregateId);
    this.#pendingParks.set(k, (this.#pendingParks.get(k) ?? 0) + 1);
  }

  /** The parked row is written (or the write was abandoned with its session). */
  parkWritten(aggregateType: string, aggregateId: string): void {
    const k = keyOf(aggregateType, aggregateId);
    const n = (this.#pendingParks.get(k) ?? 1) - 1;
    if (n <= 0) this.#pendingParks.delete(k);
    else this.#pendingParks.set(k, n);
  }

  /** Unblocks when no park decision is pending; false means: look at the table again. */
  tryUnblock(aggregateType: string, aggregateId: string): boolean {
    const k = keyOf(aggregateType, aggregateId);
    if (this.#pendingParks.has(k)) return false;
    this.#blocked.delete(k);
    return true;
  }

  async reload(db: pg.Pool, schema: string, table: string): Promise<void> {
    const r = await db.query<{ aggregate_type: string; aggregate_id: string }>(
      `SELECT DISTINCT aggregate_type, aggregate_id FROM ${qualified(schema, table)}
        WHERE status IN ('failed', 'dead', 'parked')`,
    );
    this.#blocked.clear();
    for (const row of r.rows) this.#blocked.add(keyOf(row.aggregate_type, row.aggregate_id));
  }
}
