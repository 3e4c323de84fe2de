/** Writing the backlogs: 500-byte payloads over 1,000 aggregates, as the relay's users would. */
import pg from 'pg';

/** `rows` rows of aggregate type `type`, `txnRows` per transaction (one INSERT … SELECT each). */
export async function insertBulk(db: pg.Client, type: string, rows: number, txnRows: number): Promise<void> {
  for (let done = 0; done < rows; done += txnRows) {
    const n = Math.min(txnRows, rows - done);
    const r = await db.query(
      `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload)
       SELECT $3, 'agg-' || ((g + $1) % 1000), 'BenchEvent', convert_to(lpad((g + $1)::text, 500, 'x'), 'UTF8')
         FROM generate_series(1, $2::int) AS g`,
      [done, n, type],
    );
    if (r.rowCount !== n) throw new Error(`inserted ${r.rowCount} rows, expected ${n}`);
  }
}

/** `count` single-row transactions (autocommit INSERTs) over `conns` connections. */
export async function insertSingles(url: string, type: string, count: number, conns = 4): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: conns }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        for (let i = next++; i < count; i = next++) {
          const r = await c.query({
            name: 'single',
            text: SINGLE,
            values: [type, `agg-${i % 1000}`, payload(i)],
          });
          if (r.rowCount !== 1) throw new Error('single-row insert inserted nothing');
        }
      } finally {
        await c.end();
      }
    }),
  );
}

export const SINGLE = `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, 'BenchEvent', $3)`;

/** 500 bytes whose leading digits are `seq` (x-padded on the right): readable back from the record. */
export function payload(seq: number): Buffer {
  return Buffer.from(String(seq).padEnd(500, 'x'));
}

/** The sequence number in a record value written by `payload`. */
export function seqOf(value: Buffer | null): number {
  if (!value) return -1;
  let n = 0;
  let i = 0;
  for (; i < value.length && value[i]! >= 48 && value[i]! <= 57; i++) n = n * 10 + value[i]! - 48;
  return i === 0 ? -1 : n;
}

export async function currentLsn(db: pg.Client): Promise<string> {
  return (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
}

export async function createSlots(db: pg.Client, slots: string[]): Promise<void> {
  for (const s of slots) await db.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [s]);
}

/**
 * Drops a slot once its last consumer has gone: the walsender of a relay that just exited may
 * hold it for a moment (55006 "is active for PID …").
 */
export async function dropSlot(db: pg.Client, slot: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await db.query('SELECT pg_drop_replication_slot($1)', [slot]);
      return;
    } catch (e) {
      if ((e as { code?: string }).code !== '55006' || Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
