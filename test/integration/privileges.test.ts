import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, slotOf, spawnCli } from '../support/relay.ts';

/**
 * Issue 10 item 6: privileges. A role with no grants used to pass `check` ("preflight passed"),
 * then `run` died with `[PROTOCOL_VIOLATION] permission denied`, a stack trace and exit 70,
 * leaving a newly created slot behind that retained WAL.
 */
const db = useTestDatabase({ name: 'privileges' });
const suffix = () => db.name.slice(-8);
const roles: string[] = [];

async function role(name: string, attrs = ''): Promise<string> {
  const r = `${name}_${suffix()}`;
  await db.query(`CREATE ROLE ${r} LOGIN ${attrs}`);
  roles.push(r);
  return r;
}

function as(user: string): string {
  const u = new URL(db.url);
  u.username = user;
  u.password = '';
  return u.toString();
}

async function cli(args: string[]) {
  const p = spawnCli(args);
  const code = await p.exited;
  return { code, err: p.logs(), out: p.stdout() };
}

const slotExists = async (slot: string) =>
  (await db.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot])).length === 1;

beforeAll(async () => {
  await migrateDb(db);
});

afterAll(async () => {
  for (const r of roles) {
    await db.query(`DROP OWNED BY ${r}`).catch(() => {});
    await db.query(`DROP ROLE ${r}`).catch(() => {});
  }
});

describe('check verifies what the relay needs; run creates the slot only after that', () => {
  it('a REPLICATION role with no grants: check exits 78 naming every missing GRANT', async () => {
    const r0 = await role('nogrant', 'REPLICATION');
    const r = await cli(['check', '--database-url', as(r0), '--slot', slotOf(db)]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/INSUFFICIENT_PRIVILEGE/);
    expect(r.err).toContain(
      `role ${r0} lacks SELECT, UPDATE, DELETE on public.outbox and SELECT, UPDATE on public.outbox_relay_state and SELECT, UPDATE on public.outbox_relay_progress`,
    );
    expect(r.err).toContain(
      `fix: GRANT SELECT, UPDATE, DELETE ON public.outbox TO ${r0}; GRANT SELECT, UPDATE ON public.outbox_relay_state TO ${r0}; GRANT SELECT, UPDATE ON public.outbox_relay_progress TO ${r0};`,
    );
    expect(r.err).not.toMatch(/preflight passed/);
  });

  it('run with that role exits 78 (no stack trace) and leaves no slot behind', async () => {
    const r0 = roles[0]!;
    const slot = `fresh_${suffix()}`;
    const r = await cli(['run', '--sink', 'stdout', '--database-url', as(r0), '--slot', slot]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/\[INSUFFICIENT_PRIVILEGE\]/);
    expect(r.err).toMatch(/fix: GRANT SELECT, UPDATE, DELETE ON public\.outbox/);
    expect(r.err).not.toMatch(/\n\s+at /); // no stack trace
    expect(await slotExists(slot)).toBe(false);
  });

  it('only DELETE missing: named, with the --no-prune alternative', async () => {
    const r1 = await role('nodelete', 'REPLICATION');
    await db.query(`GRANT SELECT, UPDATE ON public.outbox TO ${r1}`);
    await db.query(
      `GRANT SELECT, UPDATE ON public.outbox_relay_state, public.outbox_relay_progress TO ${r1}`,
    );
    const r = await cli(['check', '--database-url', as(r1), '--slot', slotOf(db)]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toContain(
      `lacks DELETE on public.outbox (DELETE is for retention pruning: not needed with --no-prune)`,
    );
    expect(r.err).toContain(`fix: GRANT DELETE ON public.outbox TO ${r1};`);
    // A relay that runs with --no-prune needs no DELETE: check takes the same option.
    const noPrune = await cli(['check', '--no-prune', '--database-url', as(r1), '--slot', slotOf(db)]);
    expect(noPrune.err).toMatch(/preflight passed/);
    expect(noPrune.code).toBe(EXIT.OK);
  });

  it('a slot migrate did not see: its state row is missing and the role may not insert it', async () => {
    const r1 = roles.find((r) => r.startsWith('nodelete_'))!;
    await db.query(`GRANT DELETE ON public.outbox TO ${r1}`);
    const other = `other_${suffix()}`;
    const r = await cli(['check', '--database-url', as(r1), '--slot', other]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toContain(
      `public.outbox_relay_state has no row for slot ${other}, and role ${r1} may not insert it`,
    );
    expect(r.err).toContain(`fix: outbox-relay migrate --slot ${other}`);
    expect(r.err).toContain(`GRANT INSERT ON public.outbox_relay_state TO ${r1};`);
    // With migrate's slot (its row exists) the same role passes.
    const ok = await cli(['check', '--database-url', as(r1), '--slot', slotOf(db)]);
    expect(ok.err).toMatch(/preflight passed/);
  });

  it('no USAGE on the schema: named with its GRANT', async () => {
    const r2 = await role('noschema', 'REPLICATION');
    await db.query('CREATE SCHEMA IF NOT EXISTS locked');
    await db.query(`REVOKE ALL ON SCHEMA locked FROM PUBLIC`);
    const c = await db.pool.connect();
    try {
      const { migrate } = await import('../../src/store/migrate.ts');
      await migrate(c, { schema: 'locked', table: 'outbox', publication: 'locked_pub' });
    } finally {
      c.release();
    }
    const r = await cli([
      'check',
      '--database-url',
      as(r2),
      '--schema',
      'locked',
      '--publication',
      'locked_pub',
      '--slot',
      `locked_${suffix()}`,
    ]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toContain(`role ${r2} lacks USAGE on schema locked`);
    expect(r.err).toContain(`fix: GRANT USAGE ON SCHEMA locked TO ${r2};`);
  });

  it('no REPLICATION: named with ALTER ROLE', async () => {
    const r3 = await role('norepl');
    const r = await cli(['check', '--database-url', as(r3), '--slot', slotOf(db)]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toContain(`fix: ALTER ROLE ${r3} WITH REPLICATION;`);
  });

  it('the grants of docs/deployment.md are enough: check passes and run streams and records its state', async () => {
    const relay = await role('relay', 'REPLICATION');
    // Exactly the least-privilege grants of docs/deployment.md.
    await db.query(`GRANT USAGE ON SCHEMA public TO ${relay}`);
    await db.query(`GRANT SELECT, UPDATE, DELETE ON public.outbox TO ${relay}`);
    await db.query(`GRANT SELECT, UPDATE ON public.outbox_relay_state TO ${relay}`);
    await db.query(`GRANT SELECT, UPDATE ON public.outbox_relay_progress TO ${relay}`);
    await db.query(`GRANT SELECT ON public.outbox_with_status TO ${relay}`);
    const ok = await cli(['check', '--database-url', as(relay), '--slot', slotOf(db)]);
    expect(ok.err).toMatch(/preflight passed/);
    expect(ok.code).toBe(EXIT.OK);
    const p = spawnCli(['run', '--sink', 'stdout', '--database-url', as(relay), '--slot', slotOf(db)]);
    try {
      await p.waitForLog(/streaming from the slot/);
      await insertEvents(db.pool, [
        { aggregateType: 'order', aggregateId: 'p-1', eventType: 'e', payload: '{}' },
      ]);
      await waitFor(() => p.stdout().includes('p-1'), { message: 'p-1 published to stdout' });
      await waitFor(
        async () =>
          (
            await db.query<{ state: string }>('SELECT state FROM outbox_relay_state WHERE slot_name = $1', [
              slotOf(db),
            ])
          )[0]?.state === 'active',
        { message: 'relay state row active' },
      );
      expect(p.logs()).not.toMatch(/cannot record the relay state|failed; retrying/);
    } finally {
      p.kill('SIGTERM');
      expect(await p.exited).toBe(0);
    }
  });
});

describe('operator commands: a refused privilege is a configuration error naming the GRANT', () => {
  it('events discard with a SELECT-only role exits 78 and changes nothing', async () => {
    const op = await role('readonly');
    // The operator's read grants of docs/deployment.md, without UPDATE.
    await db.query(
      `GRANT SELECT ON public.outbox, public.outbox_relay_progress, public.outbox_with_status TO ${op}`,
    );
    const [id] = await insertEvents(db.pool, [
      { aggregateType: 'order', aggregateId: 'op-1', eventType: 'e', payload: '{}' },
    ]);
    await db.query(`UPDATE outbox SET status = 'failed' WHERE id = $1`, [id]);
    const r = await cli(['events', 'discard', id!, '--yes', '--database-url', as(op), '--slot', slotOf(db)]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/\[INSUFFICIENT_PRIVILEGE\] permission denied: permission denied for table outbox/);
    expect(r.err).toMatch(/fix: GRANT .* ON outbox TO /);
    expect(
      (await db.query<{ status: string }>('SELECT status FROM outbox_with_status WHERE id = $1', [id]))[0]
        ?.status,
    ).toBe('failed');
  });

  it('slot drop without REPLICATION exits 78 before touching the slot', async () => {
    const op = roles.find((r) => r.startsWith('readonly_'))!;
    const r = await cli(['slot', 'drop', '--yes', '--database-url', as(op), '--slot', slotOf(db)]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toContain(`fix: ALTER ROLE ${op} WITH REPLICATION;`);
    expect(await slotExists(slotOf(db))).toBe(true);
  });
});

describe('migrate and the slot it creates', () => {
  it('a role that does not own the schema: exit 78 saying migrate needs the owner', async () => {
    const r0 = roles.find((r) => r.startsWith('nogrant_'))!;
    const r = await cli(['migrate', '--database-url', as(r0), '--slot', slotOf(db)]);
    expect(r.code).toBe(EXIT.CONFIG);
    expect(r.err).toMatch(/\[INSUFFICIENT_PRIVILEGE\] migrate: permission denied/);
    expect(r.err).toContain(`fix: run migrate as the owner of schema public and its outbox table`);
    expect(r.err).toContain(`ALTER SCHEMA public OWNER TO ${r0};`);
  });

  it('warns loudly that an unused slot retains WAL, when it creates it and whenever it finds it unused', async () => {
    const slot = `early_${suffix()}`;
    try {
      const first = await cli(['migrate', '--database-url', db.url, '--slot', slot]);
      expect(first.code).toBe(EXIT.OK);
      expect(first.err).toMatch(
        new RegExp(
          `"level":40.*replication slot ${slot} created \\(pgoutput\\): it retains WAL from now on until a relay streams from it`,
        ),
      );
      const again = await cli(['migrate', '--database-url', db.url, '--slot', slot]);
      expect(again.err).toMatch(
        new RegExp(`"level":40.*replication slot ${slot} exists but no relay streams from it`),
      );
    } finally {
      await db.query('SELECT pg_drop_replication_slot($1)', [slot]).catch(() => {});
    }
  });
});
