import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Relay } from '../../src/supervisor/relay.ts';
import { memorySink } from '../support/memory-sink.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { migrateDb, startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * Issue 20 item 6: in a SQL_ASCII database a text column holds any bytes. Converted to UTF8 by
 * the walsender, a row holding 0xff failed the stream itself at every start (a poison position:
 * every later event waited for an operator). The relay now streams such a database unconverted
 * and checks the text it reads: that row becomes its event's permanent failure, recorded
 * 'discarded' with the reason, and the stream goes on.
 */
const db = useTestDatabase({ sqlAscii: true });
let relay: Relay | null = null;
const sink = memorySink();
const published = sink.published;

beforeAll(async () => {
  await migrateDb(db);
  // A column of the user's own, which the relay does not read: its bytes must not matter either.
  await db.pool.query('ALTER TABLE outbox ADD COLUMN note text');
});

afterAll(async () => {
  await relay?.stop();
});

describe('a SQL_ASCII database with bytes that are not UTF-8', () => {
  it("a row whose text is not UTF-8 is recorded 'discarded' with the reason; the rows around it are published; no poison position", async () => {
    relay = await startRelayInProcess(
      testConfig(db, ['--ordering', 'strict', '--retry-max-ms', '500']),
      sink,
    );
    await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });
    const ids = (
      await db.pool.query<{ id: string }>(
        // One transaction: good, bad aggregate_id (0xff), bad event_type of the same aggregate as the
        // next good one (strict ordering must not park it), 0xff in a column the relay does not read.
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, note) VALUES
           ('order', 'good-1', 'e', '{}', NULL),
           ('order', E'bad-\\xff', 'e', '{}', NULL),
           ('order', 'k', E'e\\xfe', '{}', NULL),
           ('order', 'k', 'e', '{}', NULL),
           ('order', 'good-2', 'e', '{}', E'note \\xff')
         RETURNING id::text AS id`,
      )
    ).rows.map((r) => r.id);
    const status = async () =>
      (
        await db.pool.query<{ id: string; status: string; last_error: string | null }>(
          'SELECT o.id::text AS id, status, last_error FROM outbox_with_status o ORDER BY o.id',
        )
      ).rows;
    await waitFor(async () => (await status()).every((r) => r.status !== 'pending'), {
      timeoutMs: 20_000,
      message: async () =>
        `every row settled (is ${JSON.stringify(await status())}; state ${relay!.state}: ${relay!.waitingReason})`,
    });
    const rows = await status();
    expect(rows.map((r) => r.status)).toEqual([
      'published',
      'discarded',
      'discarded',
      'published',
      'published',
    ]);
    expect(rows[1]!.last_error).toMatch(
      /ROW_ENCODING: aggregate_id holds bytes that are not UTF-8 \(0xff at byte 4/,
    );
    expect(rows[2]!.last_error).toMatch(
      /ROW_ENCODING: event_type holds bytes that are not UTF-8 \(0xfe at byte 1/,
    );
    expect(published.map((m) => m.event.id)).toEqual([ids[0], ids[3], ids[4]]);
    expect(relay!.poison).toBeNull();
    expect(relay!.state).toBe('streaming');
    // The sweeper goes on too (it never claims a discarded row, which a UTF8 connection cannot read).
    const [later] = (
      await db.pool.query<{ id: string }>(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', 'k', 'e', '{}') RETURNING id::text AS id`,
      )
    ).rows;
    await waitFor(() => published.some((m) => m.event.id === later!.id), {
      message: 'a later event published',
    });
  }, 60_000);
});
