import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  fastFailureArgs,
  migrateDb,
  orderViolations,
  type RelayProcess,
  spawnRelay,
} from '../support/relay.ts';

/**
 * Rows are hostile input (issue 10, item 3; design.md §7). The test's own outbox table has lost
 * its NOT NULL and CHECK constraints, as a user-owned or hand-made table may. Every hostile row
 * must end recorded — 'failed', retried by the sweeper, then 'dead' — with a reason naming the
 * column, while the good rows around it (same transactions) are published in order; the relay
 * process (the real CLI) neither crashes, exits nor loops. Rows the contract allows (NULL
 * payload = tombstone, NULL headers = none) are published.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: RelayProcess | null = null;

type Cols = Partial<
  Record<
    | 'event_id'
    | 'aggregate_type'
    | 'aggregate_id'
    | 'event_type'
    | 'payload'
    | 'content_type'
    | 'headers'
    | 'traceparent'
    | 'created_at',
    unknown
  >
>;
const CASTS: Record<string, string> = {
  payload: 'bytea',
  headers: 'jsonb',
  created_at: 'timestamptz',
  event_id: 'uuid',
};

async function insert(client: pg.PoolClient, row: Cols): Promise<string> {
  const full: Cols = {
    aggregate_type: 'Good',
    aggregate_id: 'x',
    event_type: 'E',
    payload: Buffer.from('{}'),
    ...row,
  };
  const cols = Object.keys(full);
  const r = await client.query<{ id: string }>(
    `INSERT INTO outbox (${cols.join(', ')}) VALUES (${cols.map((c, i) => `$${i + 1}${CASTS[c] ? `::${CASTS[c]}` : ''}`).join(', ')}) RETURNING id::text`,
    cols.map((c) => full[c as keyof Cols]),
  );
  return r.rows[0]!.id;
}

const MB2 = 'z'.repeat(2 * 1024 * 1024);
/** [name, columns, what last_error must say, final status (default dead)] */
const HOSTILE: [string, Cols, RegExp, string?][] = [
  ['NULL aggregate_id', { aggregate_id: null }, /ROW_INVALID: aggregate_id is NULL/],
  ['NULL aggregate_type', { aggregate_type: null }, /ROW_INVALID: aggregate_type is NULL/],
  ['NULL event_type', { event_type: null }, /ROW_INVALID: event_type is NULL/],
  ['NULL event_id', { event_id: null }, /ROW_INVALID: event_id is NULL/],
  ['NULL content_type', { content_type: null }, /ROW_INVALID: content_type is NULL/],
  ['NULL created_at', { created_at: null }, /ROW_INVALID: created_at is NULL/],
  ['infinite created_at', { created_at: 'infinity' }, /ROW_INVALID: created_at is /],
  ['headers an array', { headers: '[1, 2]' }, /ROW_INVALID: headers is an array/],
  ['headers a string', { headers: '"x"' }, /ROW_INVALID: headers is the string "x"/],
  ['headers a number', { headers: '7' }, /ROW_INVALID: headers is a number/],
  ['nested headers', { headers: '{"a": {"b": 1}}' }, /ROW_INVALID: headers\."a" is an object/],
  ['a number header', { headers: '{"n": 1}' }, /ROW_INVALID: headers\."n" is a number/],
  ['a boolean header', { headers: '{"b": true}' }, /ROW_INVALID: headers\."b" is a boolean/],
  ['a null header', { headers: '{"x": null}' }, /ROW_INVALID: headers\."x" is NULL/],
  ['a huge header', { headers: JSON.stringify({ big: MB2 }) }, /MESSAGE_TOO_LARGE/],
  ['an invalid traceparent', { traceparent: 'not-a-trace' }, /ROW_INVALID: traceparent "not-a-trace"/],
  // Too long for PostgreSQL to index as failed/dead (btree entries hold ~2.7 kB): recorded 'discarded' with the reason.
  [
    'a giant aggregate_id',
    { aggregate_id: MB2 },
    /ROW_INVALID: aggregate_id is 2097152 bytes, over the relay's limit of 2048.*recorded 'discarded'/,
    'discarded',
  ],
  [
    'a long aggregate_id that Kafka refuses',
    { aggregate_id: 'k'.repeat(2000), payload: Buffer.from(MB2) },
    /MESSAGE_TOO_LARGE/,
  ],
  [
    'aggregate_type with a space',
    { aggregate_type: 'bad type' },
    /ROUTE: topic .* is not a legal Kafka topic/,
  ],
  [
    'aggregate_type of 300 characters',
    { aggregate_type: 'a'.repeat(300) },
    /ROUTE: topic .* is not a legal Kafka topic/,
  ],
  [
    'aggregate_type {event_type}',
    { aggregate_type: '{event_type}' },
    /ROUTE: topic .* is not a legal Kafka topic/,
  ],
  ['aggregate_type with a slash', { aggregate_type: 'a/b' }, /ROUTE: topic .* is not a legal Kafka topic/],
  [
    'aggregate_type in unicode',
    { aggregate_type: 'Bestellung-ü' },
    /ROUTE: topic .* is not a legal Kafka topic/,
  ],
  ['empty aggregate_type', { aggregate_type: '' }, /ROUTE: aggregate_type is empty/],
  ['aggregate_type "constructor"', { aggregate_type: 'constructor' }, /UNKNOWN_TOPIC_OR_PARTITION/],
  ['aggregate_type "__proto__"', { aggregate_type: '__proto__' }, /UNKNOWN_TOPIC_OR_PARTITION/],
];

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
  // A hand-made table: the relay must survive whatever its rows hold.
  await db.query(`ALTER TABLE outbox
      ALTER COLUMN event_id DROP NOT NULL, ALTER COLUMN aggregate_type DROP NOT NULL,
      ALTER COLUMN aggregate_id DROP NOT NULL, ALTER COLUMN event_type DROP NOT NULL,
      ALTER COLUMN content_type DROP NOT NULL, ALTER COLUMN headers DROP NOT NULL,
      ALTER COLUMN created_at DROP NOT NULL,
      DROP CONSTRAINT outbox_headers_object, DROP CONSTRAINT outbox_aggregate_type_not_empty`);
  await kafka.createTopic('outbox.event.Good', 1);
  await kafka.createTopic('outbox.event.Allowed', 1);
});

afterAll(async () => {
  if (relay && relay.child.exitCode === null) {
    relay.kill('SIGKILL');
    await relay.exited;
  }
  await kafka?.stop();
});

describe('hostile rows', () => {
  it('each ends dead (discarded when PostgreSQL cannot index it) with a reason naming the column; good rows around them are published in order; the relay runs on', async () => {
    relay = spawnRelay(db, kafka, fastFailureArgs(100));
    await relay.waitForLog(/streaming from the slot/);

    // Three transactions; in each, good events of one key interleaved with hostile rows.
    const good: string[] = [];
    const hostile = new Map<string, [string, RegExp, string]>();
    const allowed: string[] = [];
    let seq = 0;
    for (let t = 0; t < 3; t++) {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        for (let i = t; i < HOSTILE.length; i += 3) {
          good.push(
            await insert(client, { aggregate_id: 'k', payload: Buffer.from(JSON.stringify({ seq: seq++ })) }),
          );
          const [name, cols, reason, status = 'dead'] = HOSTILE[i]!;
          // Each hostile row is its own aggregate, so strict ordering parks no good event behind it.
          hostile.set(await insert(client, { aggregate_id: `h${i}`, ...cols }), [name, reason, status]);
        }
        good.push(
          await insert(client, { aggregate_id: 'k', payload: Buffer.from(JSON.stringify({ seq: seq++ })) }),
        );
        // Allowed by the contract: a tombstone and NULL headers.
        allowed.push(
          await insert(client, { aggregate_type: 'Allowed', aggregate_id: `t${t}`, payload: null }),
        );
        allowed.push(
          await insert(client, { aggregate_type: 'Allowed', aggregate_id: `n${t}`, headers: null }),
        );
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    }

    type Row = { id: string; status: string; attempts: number; last_error: string | null };
    const rows = async () =>
      new Map(
        (
          await db.query<Row>(
            'SELECT o.id::text AS id, status, attempts, left(last_error, 600) AS last_error FROM outbox_with_status o',
          )
        ).map((r) => [r.id, r]),
      );
    const describeRows = async () => {
      const now = await rows();
      const wrong = [...hostile]
        .filter(([id, [, , status]]) => now.get(id)?.status !== status)
        .map(([id, [name]]) => `${name}: ${JSON.stringify(now.get(id))}`);
      const notPublished = [...good, ...allowed].filter((id) => now.get(id)?.status !== 'published');
      return `hostile rows not recorded: ${wrong.join('; ')} | good rows not published: ${notPublished.join(',')}\nlogs: ${relay!.logs().slice(-3000)}`;
    };
    await waitFor(
      async () => {
        const now = await rows();
        return (
          [...hostile].every(([id, [, , status]]) => now.get(id)?.status === status) &&
          [...good, ...allowed].every((id) => now.get(id)?.status === 'published')
        );
      },
      { timeoutMs: 90_000, intervalMs: 250, message: describeRows },
    );

    const now = await rows();
    for (const [id, [name, reason, status]] of hostile) {
      const r = now.get(id)!;
      expect(r.last_error, name).toMatch(reason);
      // The relay's own refusals say how to fix the row; the broker's name the limit or the topic.
      if (/ROW_INVALID|ROUTE/.test(r.last_error!)) expect(r.last_error, name).toMatch(/Fix: /);
      expect(r.status, name).toBe(status);
      expect(r.attempts, name).toBe(status === 'dead' ? 2 : 1);
    }
    // The good events: all on the broker, in order of their key.
    const records = await kafka.readAll('outbox.event.Good');
    const seen = records
      .filter((m) => m.key?.toString() === 'k')
      .map((m) => ({ key: 'k', seq: JSON.parse(m.value!.toString()).seq as number }));
    expect(new Set(seen.map((s) => s.seq)).size).toBe(seq);
    expect(orderViolations(seen)).toEqual([]);
    // Nothing hostile reached the topic of good events.
    expect(records.filter((m) => m.key?.toString() !== 'k')).toEqual([]);
    const allowedRecords = await kafka.readAll('outbox.event.Allowed');
    expect(
      allowedRecords
        .filter((m) => m.value === null)
        .map((m) => m.key?.toString())
        .sort(),
    ).toEqual(['t0', 't1', 't2']);
    // Still running: no crash, no exit; nothing logged as an uncaught error.
    expect(relay.child.exitCode).toBeNull();
    expect(relay.logs()).not.toMatch(/uncaught|unhandled/i);
    relay.kill('SIGTERM');
    expect(await relay.exited).toBe(0);
  });
});
