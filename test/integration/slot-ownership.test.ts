import { beforeAll, describe, expect, it } from 'vitest';
import { isRelayError } from '../../src/errors.ts';
import { EXIT } from '../../src/exit-codes.ts';
import { readSlot } from '../../src/sweeper/slot-watch.ts';
import { useTestDatabase } from '../support/postgres.ts';
import { migrateDb, slotOf, spawnCli } from '../support/relay.ts';

/**
 * Issue 10 item 5: slot names are global to a PostgreSQL cluster. Database `app` owns slot S;
 * every command pointed at database `app2` with --slot S must refuse, naming both databases, and
 * never read, report or drop app's slot as its own. (Before: `slot drop` on app2 dropped app's
 * slot, `check` passed, `migrate` skipped the slot silently, `status` showed app's slot.)
 */
const app = useTestDatabase({ name: 'own_app' });
const app2 = useTestDatabase({ name: 'own_app2' });
let slot: string;

async function cli(args: string[]) {
  const p = spawnCli(args);
  const code = await p.exited;
  return { code, err: p.logs(), out: p.stdout() };
}

const slotRow = async () =>
  (
    await app.query<{ database: string; confirmed: string }>(
      'SELECT database, confirmed_flush_lsn::text AS confirmed FROM pg_replication_slots WHERE slot_name = $1',
      [slot],
    )
  )[0];

/** The refusal names the slot and both databases. */
function expectRefusal(text: string) {
  expect(text).toMatch(/SLOT_OTHER_DATABASE/);
  expect(text).toContain(`slot ${slot} belongs to database ${app.name}, not to ${app2.name}`);
}

beforeAll(async () => {
  slot = slotOf(app);
  await migrateDb(app); // creates app's slot
  // app2 has its own outbox and publication, but no slot of its own under that name.
  const client = await app2.pool.connect();
  try {
    const { migrate } = await import('../../src/store/migrate.ts');
    await migrate(client, { schema: 'public', table: 'outbox', publication: 'outbox_pub' });
  } finally {
    client.release();
  }
  expect((await slotRow())?.database).toBe(app.name);
});

describe("a slot of the same name on another database is never app2's", () => {
  it('slot drop --database-url …/app2 refuses (exit 78) and app keeps its slot', async () => {
    const before = await slotRow();
    const r = await cli(['slot', 'drop', '--yes', '--database-url', app2.url, '--slot', slot]);
    expect(r.code).toBe(EXIT.CONFIG);
    expectRefusal(r.err);
    expect(await slotRow()).toEqual(before);
  });

  it('check refuses (exit 78)', async () => {
    const r = await cli(['check', '--database-url', app2.url, '--slot', slot]);
    expect(r.code).toBe(EXIT.CONFIG);
    expectRefusal(r.err);
  });

  it('migrate refuses before changing anything (exit 78)', async () => {
    const r = await cli(['migrate', '--database-url', app2.url, '--slot', slot]);
    expect(r.code).toBe(EXIT.CONFIG);
    expectRefusal(r.err);
  });

  it('run refuses (exit 78) without touching the slot', async () => {
    const before = await slotRow();
    const r = await cli(['run', '--sink', 'stdout', '--database-url', app2.url, '--slot', slot]);
    expect(r.code).toBe(EXIT.CONFIG);
    expectRefusal(r.err);
    expect(await slotRow()).toEqual(before);
  });

  it("status reports it as a problem instead of showing app's slot", async () => {
    const r = await cli(['status', '--json', '--database-url', app2.url, '--slot', slot]);
    const report = JSON.parse(r.out) as {
      healthy: boolean;
      problems: string[];
      slot: { exists: boolean; confirmedFlushLsn: string | null; error: string | null };
    };
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    expect(report.healthy).toBe(false);
    expect(report.slot.exists).toBe(false);
    expect(report.slot.confirmedFlushLsn).toBeNull();
    expectRefusal(report.slot.error!);
    expectRefusal(report.problems.join('\n'));
  });

  it('the shared readSlot (slot watch, retention, status, slot drop) throws SLOT_OTHER_DATABASE', async () => {
    const e = await readSlot(app2.pool, slot).catch((x: unknown) => x);
    expect(isRelayError(e, 'SLOT_OTHER_DATABASE')).toBe(true);
    expectRefusal(`SLOT_OTHER_DATABASE ${(e as Error).message}`);
    expect((await readSlot(app.pool, slot))?.confirmedFlushLsn).toBe((await slotRow())?.confirmed);
  });

  it("on app itself, everything still works: check passes and slot drop drops app's slot", async () => {
    const ok = await cli(['check', '--database-url', app.url, '--slot', slot]);
    expect(ok.err).toMatch(/preflight passed/);
    expect(ok.code).toBe(EXIT.OK);
    const r = await cli(['slot', 'drop', '--yes', '--database-url', app.url, '--slot', slot]);
    expect(r.code).toBe(EXIT.OK);
    expect(await slotRow()).toBeUndefined();
  });
});
