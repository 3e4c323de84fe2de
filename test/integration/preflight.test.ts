import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../src/dev/throwaway-postgres.ts';
import { EXIT } from '../../src/exit-codes.ts';
import { createTestDatabase, useTestDatabase, waitFor } from '../support/postgres.ts';
import { migrateDb, slotOf, spawnCli } from '../support/relay.ts';

/** Runs a CLI command to completion; returns exit code and stderr. */
async function cli(args: string[], env: Record<string, string> = {}) {
  // This file's own slot name: slot names are global to the shared test cluster.
  const p = spawnCli(args, { OUTBOX_SLOT: slotOf(db), ...env });
  const code = await p.exited;
  return { code, err: p.logs(), out: p.stdout() };
}

function withUser(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  return u.toString();
}

const db = useTestDatabase();

beforeAll(async () => {
  await migrateDb(db);
});

describe('preflight errors name the problem and the fix', () => {
  it('check passes on a migrated database', async () => {
    const r = await cli(['check', '--database-url', db.url]);
    expect(r.err).toMatch(/preflight passed/);
    expect(r.code).toBe(EXIT.OK);
  });

  it('a role without REPLICATION', async () => {
    const role = `norepl_${db.name}`.slice(0, 60);
    await db.query(`CREATE ROLE ${role} LOGIN NOREPLICATION`);
    try {
      const r = await cli(['check', '--database-url', withUser(db.url, role)]);
      expect(r.code).toBe(EXIT.CONFIG);
      expect(r.err).toMatch(/ROLE_NOT_REPLICATION.*lacks the REPLICATION attribute/);
      expect(r.err).toMatch(/ALTER ROLE norepl_\w+ WITH REPLICATION/);
    } finally {
      await db.query(`DROP ROLE ${role}`);
    }
  });

  it('a missing publication', async () => {
    const r = await cli(['check', '--database-url', db.url, '--publication', 'nope_pub']);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/PUBLICATION_MISSING.*publication nope_pub does not exist/);
    expect(r.err).toMatch(/outbox-relay migrate/);
  });

  it('a publication that covers other tables and operations', async () => {
    await db.query('CREATE TABLE IF NOT EXISTS other_t (id int primary key)');
    await db.query(`CREATE PUBLICATION wide_pub FOR TABLE outbox, other_t WITH (publish = 'insert, update')`);
    const r = await cli(['check', '--database-url', db.url, '--publication', 'wide_pub']);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/PUBLICATION_MISMATCH/);
    expect(r.err).toMatch(/also covers public\.other_t/);
    expect(r.err).toMatch(/also publishes update/);
  });

  it('a missing outbox table', async () => {
    const r = await cli(['check', '--database-url', db.url, '--table', 'no_such_outbox']);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/OUTBOX_TABLE_MISSING.*no_such_outbox does not exist/);
  });

  it('a slot that exists with another plugin', async () => {
    await db.query(`SELECT pg_create_logical_replication_slot('td_slot_${db.name}'::name, 'test_decoding')`);
    const r = await cli([
      'run',
      '--database-url',
      db.url,
      '--sink',
      'stdout',
      '--slot',
      `td_slot_${db.name}`,
    ]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/SLOT_WRONG_PLUGIN.*with plugin test_decoding/);
  });

  it('a bad flag exits 64, bad configuration 78, each naming the option', async () => {
    const r = await cli(['run', '--database-url', db.url, '--batch-size', 'zero']);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toMatch(/--batch-size \(flag\): expected a whole number, got "zero"/);
    const env = await cli(['run', '--database-url', db.url], { OUTBOX_BATCH_SIZE: 'zero' });
    expect(env.code).toBe(EXIT.CONFIG);
    expect(env.err).toMatch(/OUTBOX_BATCH_SIZE \(environment\): expected a whole number, got "zero"/);
    const r2 = await cli(['run', '--sink', 'stdout'], { DATABASE_URL: '' });
    expect(r2.code).toBe(EXIT.CONFIG);
    expect(r2.err).toMatch(/--database-url \/ DATABASE_URL: is required/);
  });

  it('never logs the database password', async () => {
    const u = new URL(db.url);
    u.password = 'sup3r-secret-pw';
    const p = spawnCli([
      'run',
      '--database-url',
      u.toString(),
      '--sink',
      'stdout',
      '--log-level',
      'debug',
      '--slot',
      slotOf(db),
    ]);
    await p.waitForLog(/starting relay/);
    p.kill('SIGKILL');
    await p.exited;
    expect(p.logs()).not.toContain('sup3r-secret-pw');
    expect(p.logs()).toContain('***');
  });
});

describe('preflight on servers set up wrongly', () => {
  let replica: ThrowawayPostgres | undefined;
  let tiny: ThrowawayPostgres | undefined;

  beforeAll(async () => {
    [replica, tiny] = await Promise.all([
      startThrowawayPostgres({ settings: { wal_level: 'replica' } }),
      startThrowawayPostgres({ settings: { max_replication_slots: 1 } }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([replica?.stop(), tiny?.stop()]);
  });

  it('wal_level is not logical', async () => {
    const r = await cli(['check', '--database-url', replica!.url]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/WAL_LEVEL_NOT_LOGICAL.*wal_level is 'replica'/);
    expect(r.err).toMatch(/ALTER SYSTEM SET wal_level = 'logical'/);
  });

  it('max_replication_slots exhausted', async () => {
    const c = new pg.Client({ connectionString: tiny!.url });
    await c.connect();
    try {
      const { migrate } = await import('../../src/store/migrate.ts');
      await migrate(c, { schema: 'public', table: 'outbox', publication: 'outbox_pub' });
      await c.query(`SELECT pg_create_logical_replication_slot('someone_else', 'pgoutput')`);
    } finally {
      await c.end();
    }
    const r = await cli(['run', '--database-url', tiny!.url, '--sink', 'stdout']);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/SLOT_LIMIT_REACHED.*all 1 replication slots/);
    expect(r.err).toMatch(/max_replication_slots/);
  });
});

describe('a slot held by another process', () => {
  it('waits and retries instead of crash-looping', async () => {
    // Hold the slot from a raw replication connection, like another relay would.
    const holder = new pg.Client({ connectionString: db.url, replication: 'database' } as pg.ClientConfig);
    await holder.connect();
    holder.on('error', () => {});
    void holder
      .query(
        `START_REPLICATION SLOT ${slotOf(db)} LOGICAL 0/0 (proto_version '1', publication_names 'outbox_pub')`,
      )
      .catch(() => {});
    await waitFor(
      async () =>
        (
          await db.query<{ active: boolean }>(
            `SELECT active FROM pg_replication_slots WHERE slot_name = $1`,
            [slotOf(db)],
          )
        )[0]?.active === true,
    );
    const p = spawnCli(['run', '--database-url', db.url, '--sink', 'stdout', '--slot', slotOf(db)]);
    try {
      await p.waitForLog(/standby: another process is active on the slot/);
      await new Promise((r) => setTimeout(r, 1500));
      expect(p.child.exitCode).toBeNull();
      await holder.end().catch(() => {});
      await p.waitForLog(/streaming from the slot/, 20_000);
    } finally {
      p.kill('SIGTERM');
      expect(await p.exited).toBe(0);
    }
  });
});

/**
 * Issue 36: a schema migrated before the timeline column (sql/000005_relay_timeline.sql). The
 * relay still runs on it (no comparison of timelines at start) and both `check` and the relay's
 * start say that migrate adds it; migrate then adds it, set to the server's timeline. On the code
 * before it: neither says anything.
 */
describe('a progress table without the timeline column (migrated before migration 5)', () => {
  it('check and run warn, run still streams, migrate adds the column', async () => {
    await db.query('ALTER TABLE outbox_relay_progress DROP COLUMN timeline');
    await db.query('DELETE FROM outbox_relay_migrations WHERE table_name = $1 AND version = 5', ['outbox']);
    const r = await cli(['check', '--database-url', db.url]);
    expect(r.code).toBe(EXIT.OK);
    expect(r.err).toMatch(
      /"finding":"timeline-column-missing".*has no timeline column.*outbox-relay migrate/,
    );
    const p = spawnCli(['run', '--database-url', db.url, '--sink', 'stdout', '--slot', slotOf(db)]);
    try {
      await p.waitForLog(/streaming from the slot/, 30_000);
      expect(p.logs()).toMatch(/has no timeline column \(sql\/000005_relay_timeline\.sql\)/);
    } finally {
      p.kill('SIGTERM');
      expect(await p.exited).toBe(0);
    }
    await migrateDb(db);
    const rows = await db.query<{ timeline: string | null }>(
      'SELECT timeline FROM outbox_relay_progress WHERE slot_name = $1',
      [slotOf(db)],
    );
    expect(rows[0]?.timeline).toMatch(/^[0-9A-F]{8}:\d+$/);
    const again = await cli(['check', '--database-url', db.url]);
    expect(again.code).toBe(EXIT.OK);
    expect(again.err).not.toMatch(/timeline-column-missing/);
  });
});

/**
 * The Debezium preset's table is the application's (its fact, compat/debezium/facts.ts): the
 * relay only reads it, so SELECT is enough, and Debezium's publication of every operation is
 * accepted. The same database checked as the outbox table is refused for both.
 */
describe("check --compat debezium: the application's table", () => {
  it('SELECT alone (and its side table of failed events) and a publication of updates and deletes pass; as the outbox table they do not', async () => {
    const own = await createTestDatabase({ name: 'dbzpre' });
    const slot = `${own.name}_s`.slice(0, 63);
    const role = `dbzro_${own.name}`.slice(0, 60);
    try {
      await own.query(
        `CREATE TABLE public.outbox (
           id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
           aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
      );
      const args = ['--database-url', own.url, '--slot', slot];
      const m = spawnCli(['migrate', ...args, '--compat', 'debezium']);
      expect(await m.exited, m.logs()).toBe(0);
      await own.query(`ALTER PUBLICATION outbox_pub SET (publish = 'insert, update, delete')`);
      await own.query(`CREATE ROLE ${role} LOGIN REPLICATION`);
      await own.query(`GRANT SELECT ON public.outbox TO ${role}`);
      await own.query(
        `GRANT SELECT, UPDATE ON public.outbox_relay_state, public.outbox_relay_progress TO ${role}`,
      );
      const as = ['--database-url', withUser(own.url, role), '--slot', slot];
      // The side table of failed events: the stream inserts, the sweeper updates, retention deletes.
      const noSide = spawnCli(['check', ...as, '--compat', 'debezium']);
      expect(await noSide.exited).toBe(EXIT.CONFIG);
      expect(noSide.logs()).toContain(
        `lacks SELECT, INSERT, UPDATE, DELETE on public.outbox_relay_failed (DELETE is for retention pruning: not needed with --no-prune)`,
      );
      expect(noSide.logs()).toContain(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON public.outbox_relay_failed TO ${role};`,
      );
      await own.query(`GRANT SELECT, INSERT, UPDATE ON public.outbox_relay_failed TO ${role}`);
      const noPrune = spawnCli(['check', ...as, '--compat', 'debezium', '--no-prune']);
      expect(await noPrune.exited, noPrune.logs()).toBe(EXIT.OK);
      const noDelete = spawnCli(['check', ...as, '--compat', 'debezium']);
      expect(await noDelete.exited).toBe(EXIT.CONFIG);
      expect(noDelete.logs()).toContain('lacks DELETE on public.outbox_relay_failed');
      await own.query(`GRANT DELETE ON public.outbox_relay_failed TO ${role}`);
      const dbz = spawnCli(['check', ...as, '--compat', 'debezium']);
      expect(await dbz.exited, dbz.logs()).toBe(EXIT.OK);
      expect(dbz.logs()).toMatch(/preflight passed/);
      const outbox = spawnCli(['check', ...as]);
      expect(await outbox.exited).toBe(EXIT.CONFIG);
      expect(outbox.logs()).toMatch(/lacks UPDATE, DELETE on public\.outbox/);
      await own.query(`GRANT UPDATE, DELETE ON public.outbox TO ${role}`);
      const wide = spawnCli(['check', ...as]);
      expect(await wide.exited).toBe(EXIT.CONFIG);
      expect(wide.logs()).toMatch(/PUBLICATION_MISMATCH.*also publishes update, delete/);
    } finally {
      await own.query('SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1', [
        slot,
      ]);
      await own.query(`DROP OWNED BY ${role}`).catch(() => {});
      await own.close();
      await db.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
    }
  }, 90_000);
});
