import { createHash, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { ReplicationConnection } from '../../src/replication/connection.ts';
import { OutboxDecoder } from '../../src/replication/decoder.ts';
import type { OutboxEvent } from '../../src/route/event.ts';
import { useTestDatabase } from '../support/postgres.ts';
import { migrateDb } from '../support/relay.ts';

/**
 * The replication stream read by the relay's CopyReader (src/replication/copy-reader.ts) on a
 * real PostgreSQL: every payload the decoder keeps as a view of its message must still hold its
 * row's bytes once the whole stream has been read — payloads of 1 byte to 300 kB, so messages
 * span socket reads — and the server's other messages (the end of the stream, its errors) still
 * reach pg's parser.
 */
const db = useTestDatabase();
// Slot names are cluster-wide: one of this file's own. It lives in the test database, whose
// close (useTestDatabase) drops it once its walsender is gone: a drop right after the stream
// closed raced that walsender ("slot … is active for PID …", seen once in CI).
const slot = `copy_${randomBytes(4).toString('hex')}`;

/** A deterministic payload per row: its size varies, its bytes name the row. */
function payload(i: number): Buffer {
  const size = [1, 500, 8_000, 70_000, 300_000][i % 5]!;
  const out = Buffer.alloc(size);
  const seed = createHash('sha256').update(String(i)).digest();
  for (let k = 0; k < size; k++) out[k] = seed[k % 32]! ^ (k & 0xff);
  return out;
}

beforeAll(async () => {
  await migrateDb(db);
  await db.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
});

describe('the copy stream, read by CopyReader', () => {
  it('keeps every payload view intact until the end (1 B – 300 kB rows, 20 transactions)', async () => {
    const rows = 400;
    for (let t = 0; t < 20; t++) {
      const ids = Array.from({ length: rows / 20 }, (_, k) => t * (rows / 20) + k);
      await db.query(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, content_type)
         SELECT 'Copy', 'a-' || i, 'Copied', p, 'application/octet-stream'
           FROM unnest($1::int[], $2::bytea[]) AS u(i, p)`,
        [ids, ids.map(payload)],
      );
    }
    const [count] = await db.query<{ n: string }>(
      `SELECT count(*) AS n FROM outbox WHERE aggregate_type = 'Copy'`,
    );
    expect(Number(count!.n)).toBe(rows);

    const conn = await ReplicationConnection.open(db.url);
    const decoder = new OutboxDecoder('public', 'outbox');
    const events: OutboxEvent[] = [];
    let stable: boolean | null = null;
    // Until every row arrived (the transactions of the slot are exactly this test's), or 60 s.
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${events.length} of ${rows} events after 60 s`)),
        60_000,
      );
      conn
        .stream(
          { slot, publication: 'outbox_pub' },
          {
            onStart: ({ stableBuffers }) => {
              stable = stableBuffers;
              decoder.keepViews = stableBuffers;
            },
            onData: (data, start, end) => {
              const d = decoder.decode(data, start, end);
              if (d.kind === 'event') events.push(d.event);
              if (d.kind === 'commit' && events.length >= rows) {
                clearTimeout(timer);
                resolve();
              }
            },
            onKeepalive: () => {},
          },
        )
        .catch(reject);
    });
    await done;
    await conn.close();

    expect(stable).toBe(true);
    expect(events).toHaveLength(rows);
    const byAggregate = new Map(events.map((e) => [e.aggregateId, e]));
    for (let i = 0; i < rows; i++) {
      const e = byAggregate.get(`a-${i}`);
      expect(e, `row ${i}`).toBeDefined();
      expect(e!.payload!.equals(payload(i)), `payload of row ${i} (${payload(i).length} bytes)`).toBe(true);
    }
  });

  it("ends with the server's error when the slot is taken: pg's parser still gets the other messages", async () => {
    const first = await ReplicationConnection.open(db.url);
    const second = await ReplicationConnection.open(db.url);
    const handlers = { onData: () => {}, onKeepalive: () => {} };
    const running = first.stream({ slot, publication: 'outbox_pub' }, handlers);
    running.catch(() => {});
    // Wait until the first connection holds the slot.
    for (let i = 0; i < 100; i++) {
      const [r] = await db.query<{ active: boolean }>(
        'SELECT active FROM pg_replication_slots WHERE slot_name = $1',
        [slot],
      );
      if (r?.active) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await expect(second.stream({ slot, publication: 'outbox_pub' }, handlers)).rejects.toMatchObject({
      code: '55006',
    });
    await second.close();
    await first.close();
  });
});
