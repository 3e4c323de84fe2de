import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { debeziumStringArgs } from '../support/debezium-table.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/postgres.ts';
import { slotOf, spawnCli, startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * `migrate --compat debezium --narrow-publication` on Debezium's default publication
 * (`dbz_publication`, FOR ALL TABLES) while the slot is behind it and transactions are open
 * across it: the publication is dropped and created again, in one transaction, for the outbox
 * table alone. The relay then streams the slot from Debezium's position — through WAL decoded
 * with the old definition (other tables' rows arrive and are ignored), the narrowing, and WAL
 * decoded with the new one — and publishes every event after Debezium's offsets exactly once.
 * T1 wrote the outbox before the narrowing: the narrowing waits for it to commit (without that
 * wait its first insert was lost: PostgreSQL 15 did not send it, a second slot showed the same).
 * T2 wrote only another table before the narrowing and the outbox after it: sent. Without the
 * flag, migrate only warns, naming it; the dry run says what it would do.
 */
let kafka: KafkaHarness;
let db: TestDatabase;
let relay: Relay | null = null;
let dir: string;

beforeAll(async () => {
  kafka = await startKafka();
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'narrow-'));
});

afterAll(async () => {
  await relay?.stop();
  await db?.query('SELECT pg_drop_replication_slot($1)', [slotOf(db)]).catch(() => {});
  await db?.close();
  await kafka?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function insert(client: pg.ClientBase, id: string, other = true): Promise<void> {
  await client.query(
    `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'Order', $2, 'Created', '{}')`,
    [id, `k-${id.slice(0, 4)}`],
  );
  if (other) await client.query('INSERT INTO orders (note) VALUES ($1)', [id]);
}

async function transaction(ids: string[], deleteAfter = false): Promise<void> {
  const c = await db.pool.connect();
  try {
    await c.query('BEGIN');
    for (const id of ids) await insert(c, id);
    if (deleteAfter) await c.query('DELETE FROM outbox WHERE id = ANY($1::uuid[])', [ids]);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

const publication = () =>
  db.query<{ all: boolean; tables: string[] | null }>(
    `SELECT puballtables AS all,
            (SELECT array_agg(schemaname || '.' || tablename) FROM pg_publication_tables WHERE pubname = 'dbz_publication' AND NOT puballtables) AS tables
       FROM pg_publication WHERE pubname = 'dbz_publication'`,
  );

it('narrows dbz_publication (FOR ALL TABLES) mid-stream: every event after the offsets exactly once', async () => {
  await db.query(
    `CREATE TABLE public.outbox (
       id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
       aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
  );
  await db.query('CREATE TABLE public.orders (id serial PRIMARY KEY, note text)');
  await db.query('CREATE PUBLICATION dbz_publication FOR ALL TABLES');
  await db.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotOf(db)]);
  await db.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [`${slotOf(db)}_peek`]);
  await kafka.createTopic('outbox.event.Order', 3);

  // What Debezium had published: its offsets are past these transactions. From the insert
  // position (the test clusters run with synchronous_commit=off: pg_current_wal_lsn may lag a
  // commit), one byte back: the next change is written AT that position, and an lsn_proc equal to
  // a change's position says Debezium processed that change.
  const byDebezium = [randomUUID(), randomUUID(), randomUUID()];
  await transaction(byDebezium.slice(0, 2));
  await transaction(byDebezium.slice(2), true);
  const [now] = await db.query<{ lsn: string }>(
    `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn - 1)::text AS lsn`,
  );
  const offsets = join(dir, 'offsets.json');
  writeFileSync(offsets, `{"lsn_proc":${now!.lsn},"lsn_commit":${now!.lsn},"txId":1}`);

  // Open while the narrowing starts: T1 has written the outbox (the narrowing waits for it: an
  // insert before the narrowing in a transaction committed after it is never sent by pgoutput),
  // T2 only another table (it goes on across the narrowing and writes the outbox after it).
  const t1 = await db.pool.connect();
  const t2 = await db.pool.connect();
  const across = [randomUUID(), randomUUID(), randomUUID()];
  await t1.query('BEGIN');
  await insert(t1, across[0]!);
  await t2.query('BEGIN');
  await t2.query(`INSERT INTO orders (note) VALUES ('t2')`);

  const args = [
    'migrate',
    '--database-url',
    db.url,
    '--publication',
    'dbz_publication',
    '--slot',
    slotOf(db),
    ...debeziumStringArgs(kafka),
    '--debezium-offsets',
    offsets,
  ];
  const warned = spawnCli(args);
  expect(await warned.exited, warned.logs()).toBe(0);
  expect(warned.logs()).toMatch(/publication dbz_publication is FOR ALL TABLES.*add --narrow-publication/);
  expect(await publication()).toEqual([{ all: true, tables: null }]);

  const dry = spawnCli([...args, '--narrow-publication', '--dry-run']);
  expect(await dry.exited, dry.logs()).toBe(0);
  expect(dry.stdout()).toMatch(
    /publication dbz_publication is FOR ALL TABLES: it would be dropped and created again in one transaction as FOR TABLE "public"."outbox" WITH \(publish = 'insert'\)/,
  );
  expect(await publication()).toEqual([{ all: true, tables: null }]);

  const narrowed = spawnCli([...args, '--narrow-publication']);
  await waitFor(
    async () =>
      (
        await db.query(
          `SELECT 1 FROM pg_locks WHERE relation = 'public.outbox'::regclass AND mode = 'ShareLock' AND NOT granted`,
        )
      ).length === 1,
    { timeoutMs: 60_000, message: 'the narrowing waiting for the transaction that wrote the outbox' },
  );
  expect(await publication()).toEqual([{ all: true, tables: null }]);
  await insert(t1, across[1]!);
  await t1.query('COMMIT');
  t1.release();
  expect(await narrowed.exited, narrowed.logs()).toBe(0);
  expect(narrowed.logs()).toMatch(
    /publication dbz_publication narrowed from FOR ALL TABLES to public.outbox/,
  );
  expect(await publication()).toEqual([{ all: false, tables: ['public.outbox'] }]);

  await insert(t2, across[2]!);
  await t2.query('COMMIT');
  t2.release();
  const after = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  await transaction(after.slice(0, 2));
  await transaction(after.slice(2), true);
  const [end] = await db.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');

  const config = testConfig(
    db,
    ['--publication', 'dbz_publication', '--slot', slotOf(db), ...debeziumStringArgs(kafka), '--no-http'],
    kafka.brokers,
  );
  relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
  // Everything up to the last insert is settled once the slot is confirmed past it.
  await waitFor(
    async () =>
      (
        await db.query(
          'SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn >= $2::pg_lsn',
          [slotOf(db), end!.lsn],
        )
      ).length === 1,
    { timeoutMs: 30_000, message: 'the slot confirmed past the last transaction' },
  );
  const label = new Map<string, string>(
    Object.entries({ byDebezium, across, after }).flatMap(([group, ids]) =>
      ids.map((id, i): [string, string] => [id, `${group}[${i}]`]),
    ),
  );
  const published = (await kafka.readAll('outbox.event.Order')).map((r) => {
    const id = r.headers.id!.toString();
    return label.get(id) ?? id;
  });
  const peek = await db.query<{ lsn: string; d: string }>(
    `SELECT lsn::text, encode(data, 'hex') AS d FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', 'dbz_publication') WHERE get_byte(data, 0) = 73`,
    [`${slotOf(db)}_peek`],
  );
  const sent = peek
    .map((r) => [...label.keys()].find((id) => Buffer.from(r.d, 'hex').includes(Buffer.from(id))))
    .filter(Boolean)
    .map((id) => label.get(id!));
  const expected = [...across, ...after].map((id) => label.get(id)!);
  // pgoutput itself sent every one of them (a second slot, read after the fact).
  expect(expected.filter((l) => !sent.includes(l))).toEqual([]);
  await db.query('SELECT pg_drop_replication_slot($1)', [`${slotOf(db)}_peek`]);
  // Nothing kept as failed: every event is on the topic.
  expect(await db.query('SELECT status, last_error FROM outbox_relay_failed')).toEqual([]);
  expect(published.sort()).toEqual(expected.sort());
}, 300_000);
