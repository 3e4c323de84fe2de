import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { slotOf, spawnCli } from '../support/relay.ts';

/**
 * `migrate --compat debezium --debezium-offsets <file> --dry-run` on Debezium's pgoutput slot:
 * says what the cutover would do (the slot and its plugin, Debezium's lsn_proc and lsn_commit,
 * the skip rule, the side tables it would create) and changes nothing: no table, no publication,
 * no cutover record, the slot where it was. Then the real run does what was said.
 */
let db: TestDatabase;
let dir: string;

beforeAll(async () => {
  db = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'dry-run-'));
});

afterAll(async () => {
  await db?.query('SELECT pg_drop_replication_slot($1)', [slotOf(db)]).catch(() => {});
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('migrate --compat debezium --debezium-offsets --dry-run prints the cutover and changes nothing', async () => {
  await db.query(
    `CREATE TABLE public.outbox (
       id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
       aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
  );
  // Debezium's slot, then its offsets past it (a distributed worker's record saved as a file).
  const [slot] = await db.query<{ lsn: string }>(
    `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`,
    [slotOf(db)],
  );
  const [now] = await db.query<{ proc: string; commit: string; proc_lsn: string; commit_lsn: string }>(
    `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS proc, (pg_current_wal_lsn() - '0/0'::pg_lsn - 16)::text AS commit,
            pg_current_wal_lsn()::text AS proc_lsn, (pg_current_wal_lsn() - 16)::text AS commit_lsn`,
  );
  const offsets = join(dir, 'offsets.json');
  writeFileSync(offsets, JSON.stringify({ lsn_proc: Number(now!.proc), lsn_commit: Number(now!.commit) }));
  const state = () =>
    db.query(
      `SELECT (SELECT count(*) FROM pg_tables WHERE tablename LIKE 'outbox_relay%')::int AS tables,
              (SELECT count(*) FROM pg_publication)::int AS publications,
              (SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1) AS slot`,
      [slotOf(db)],
    );
  const before = await state();
  const args = ['--database-url', db.url, '--slot', slotOf(db), '--compat', 'debezium'];

  const dry = spawnCli(['migrate', ...args, '--debezium-offsets', offsets, '--dry-run']);
  expect(await dry.exited, dry.logs()).toBe(0);
  const out = dry.stdout();
  expect(out).toMatch(/^dry run: nothing is changed$/m);
  expect(out).toContain(`slot ${slotOf(db)}: found, plugin pgoutput, confirmed_flush_lsn ${slot!.lsn}`);
  expect(out).toContain(`lsn_proc ${now!.proc_lsn}, lsn_commit ${now!.commit_lsn}`);
  expect(out).toMatch(/skips transactions committed at or before lsn_commit .* the changes up to lsn_proc/);
  expect(out).toMatch(/would apply migration 1001_side_tables \(creates .*"outbox_relay_failed"/);
  expect(out).toMatch(/publication outbox_pub: would be created/);
  expect(await state()).toEqual(before);
  expect(before).toEqual([{ tables: 0, publications: 0, slot: slot!.lsn }]);

  // The real run does what the dry run said.
  const real = spawnCli(['migrate', ...args, '--debezium-offsets', offsets]);
  expect(await real.exited, real.logs()).toBe(0);
  const [cutover] = await db.query<{ lsn_proc: string; lsn_commit: string }>(
    'SELECT lsn_proc::text, lsn_commit::text FROM outbox_relay_cutover',
  );
  expect(cutover).toEqual({ lsn_proc: now!.proc_lsn, lsn_commit: now!.commit_lsn });
  const again = spawnCli(['migrate', ...args, '--dry-run']);
  expect(await again.exited, again.logs()).toBe(0);
  expect(again.stdout()).toMatch(/^migrations: all applied$/m);
  expect(again.stdout()).toMatch(/^publication outbox_pub: exists$/m);
}, 120_000);

it("migrate --compat debezium --partitioned is refused (the table is the application's), with the fix, and changes nothing", async () => {
  const own = await createTestDatabase({ name: 'dbzpart' });
  try {
    await own.query(
      `CREATE TABLE public.outbox (
         id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
         aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
    );
    const m = spawnCli(['migrate', '--database-url', own.url, '--compat', 'debezium', '--partitioned']);
    expect(await m.exited, m.logs()).toBe(78);
    expect(m.logs()).toContain(
      "--partitioned creates the relay's own outbox table; with --compat debezium the table is the application's",
    );
    expect(m.logs()).toContain("partition the application's table yourself");
    const [tables] = await own.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_tables WHERE tablename LIKE 'outbox_relay%' AND tablename <> 'outbox_relay_migrations'`,
    );
    expect(tables!.n).toBe(0);
  } finally {
    await own.close();
  }
}, 60_000);
