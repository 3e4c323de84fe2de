/**
 * The sweeper's claim of due failed rows reads at most --max-inflight-bytes of them (payload and
 * headers; the first row always), on a real PostgreSQL: failed rows are often the large ones, and
 * a round of --sweep-batch-size rows of a few MB each (read back as hex text, twice their size)
 * outgrew the relay's memory limit — an OOM kill, and the same rows claimed again after the restart.
 */
import { expect, it } from 'vitest';
import { claimDueFailed } from '../../src/lifecycle/transitions.ts';
import { useTestDatabase } from '../support/postgres.ts';
import { insertEvents, migrateDb } from '../support/relay.ts';

const db = useTestDatabase();

it('claims up to the limit, reads only the rows within the byte budget (one at least), in id order; the rest stay locked for the next round', async () => {
  await migrateDb(db);
  const ids = await insertEvents(
    db.pool,
    Array.from({ length: 5 }, (_, i) => ({
      aggregateType: 'Big',
      aggregateId: `b${i}`,
      eventType: 'E',
      payload: 'x'.repeat(3000),
    })),
  );
  await db.pool.query(
    "UPDATE outbox SET status = 'failed', next_attempt_at = now() - interval '1 second' WHERE id = ANY($1::bigint[])",
    [ids],
  );
  const round = await db.pool.connect();
  const other = await db.pool.connect();
  try {
    await round.query('BEGIN');
    const rows = await claimDueFailed(round, 'public.outbox', 100, 7000);
    // 3,002 bytes each with their headers ('{}'): the third starts at 6,004 < 7,000, the fourth at 9,006.
    expect(rows.map((r) => r.id)).toEqual(ids.slice(0, 3));
    expect(rows[0]!.payload?.length).toBe(3000);
    expect(rows[0]!.too_large).toBe(false);
    // The other two are locked too: another claimer (a second relay's sweeper) skips all five.
    await other.query('BEGIN');
    expect(await claimDueFailed(other, 'public.outbox', 100)).toEqual([]);
    await other.query('ROLLBACK');
    await round.query('ROLLBACK');

    await round.query('BEGIN');
    // A budget below one row: that row alone, never none.
    expect((await claimDueFailed(round, 'public.outbox', 100, 1)).map((r) => r.id)).toEqual([ids[0]]);
    await round.query('ROLLBACK');
    await round.query('BEGIN');
    // A payload past what can be read back as hex text (here a cap of 2,000 bytes): claimed
    // without it, marked too large — the sweeper fails it (ROW_TOO_LARGE) instead of reading it.
    const big = await claimDueFailed(round, 'public.outbox', 2, undefined, 2000);
    expect(big.map((r) => [r.id, r.payload, r.too_large, r.payload_bytes])).toEqual([
      [ids[0], null, true, 3000],
      [ids[1], null, true, 3000],
    ]);
    await round.query('ROLLBACK');
    await round.query('BEGIN');
    // No budget: every due row up to the limit.
    expect((await claimDueFailed(round, 'public.outbox', 4)).map((r) => r.id)).toEqual(ids.slice(0, 4));
    await round.query('ROLLBACK');
  } finally {
    round.release();
    other.release();
  }
});
