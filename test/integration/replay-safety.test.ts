import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, type RelayProcess, slotOf, spawnCli } from '../support/relay.ts';

/**
 * The guards of the commands that change many rows at once: replay's confirmation, --dry-run
 * everywhere a filter changes rows, copies of copies excluded, --follow until published, and
 * `events resend|discard --filter` refusing an empty filter. A real relay (stdout sink, marks
 * rows published) runs beside the commands, as in production.
 */
const CLI = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const db = useTestDatabase();
let relay: RelayProcess;
const N = 30;

async function ops(args: string[]) {
  const p = spawnCli([...args, '--database-url', db.url, '--slot', slotOf(db)]);
  const code = await p.exited;
  return { code, out: p.stdout(), err: p.logs() };
}

async function countRows(where = 'true'): Promise<number> {
  const [r] = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM outbox_with_status WHERE ${where}`,
  );
  return Number(r!.n);
}

beforeAll(async () => {
  await migrateDb(db);
  relay = spawnCli(['run', '--database-url', db.url, '--slot', slotOf(db), '--sink', 'stdout', '--no-http']);
  await relay.waitForLog(/streaming from the slot/);
  await insertEvents(
    db.pool,
    Array.from({ length: N }, (_, i) => ({
      aggregateType: 'Order',
      aggregateId: `o${i % 5}`,
      eventType: 'OrderPlaced',
      payload: JSON.stringify({ i }),
    })),
  );
  await waitFor(async () => (await countRows("status = 'published'")) === N, {
    timeoutMs: 30_000,
    message: async () => `published: ${await countRows("status = 'published'")} of ${N}`,
  });
});

afterAll(async () => {
  relay?.kill('SIGTERM');
  await relay?.exited;
});

describe('replay', () => {
  it('--dry-run counts and changes nothing', async () => {
    const r = await ops(['replay', '--since', '1h', '--dry-run']);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(new RegExp(`^${N} event\\(s\\) would be replayed`));
    expect(await countRows()).toBe(N);
  });

  it('asks above --confirm-above; without a terminal and without --yes it refuses (64) and inserts nothing', async () => {
    const r = await ops(['replay', '--since', '1h', '--confirm-above', '10']);
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toMatch(
      /not confirmed: 30 event\(s\) is more than --confirm-above 10 .*--yes.*nothing changed/,
    );
    expect(r.err.match(/usage: see `outbox-relay replay --help`/g)).toHaveLength(1);
    expect(await countRows()).toBe(N);
  });

  it('--yes --follow copies with progress (total) and returns once every copy is published', async () => {
    const r = await ops(['replay', '--since', '1h', '--confirm-above', '10', '--yes', '--follow']);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toMatch(new RegExp(`${N} event\\(s\\) replayed`));
    expect(r.out).toMatch(new RegExp(`all ${N} copies published`));
    // Not a terminal: progress goes to the log, with the total.
    expect(r.err).toMatch(new RegExp(`replay: copied ${N}/${N} \\(100%\\)`));
    expect(r.err).toMatch(new RegExp(`replay: published ${N}/${N} \\(100%\\)`));
    // --follow returned only after the relay marked every copy published: nothing left pending.
    expect(await countRows("headers ? 'x-replay-of' AND status = 'published'")).toBe(N);
    expect(await countRows("headers ? 'x-replay-of'")).toBe(N);
    // Each copy names its original.
    const [pair] = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM outbox c JOIN outbox o ON o.id = (c.headers->>'x-replay-of')::bigint
        WHERE o.event_id = c.event_id AND NOT (o.headers ? 'x-replay-of')`,
    );
    expect(Number(pair!.n)).toBe(N);
  });

  it('a second run over the same window copies the originals only, not the first run’s copies', async () => {
    const dry = await ops(['replay', '--since', '1h', '--dry-run', '--json']);
    expect(JSON.parse(dry.out)).toMatchObject({ dryRun: true, count: N });
    const all = await ops(['replay', '--since', '1h', '--dry-run', '--json', '--include-replays']);
    expect(JSON.parse(all.out)).toMatchObject({ dryRun: true, count: 2 * N });
    const r = await ops(['replay', '--since', '1h', '--yes']);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(await countRows()).toBe(3 * N); // 30 originals + 30 + 30 copies, not 30 + 30 + 60
    expect(await countRows("headers ? 'x-replay-of'")).toBe(2 * N);
    const copiesOfCopies = await db.query(
      `SELECT 1 FROM outbox c JOIN outbox o ON o.id = (c.headers->>'x-replay-of')::bigint WHERE o.headers ? 'x-replay-of'`,
    );
    expect(copiesOfCopies).toHaveLength(0);
  });
});

describe('replay on a terminal', () => {
  it('shows one progress line, rewritten in place, with total, rate and ETA', async () => {
    // util-linux `script` gives the command a pseudo-terminal (stdin, stdout and stderr).
    const cmd = [process.execPath, CLI, 'replay', '--since', '1h', '--yes', '--aggregate-id', 'o1']
      .concat(['--database-url', db.url, '--slot', slotOf(db), '--log-format', 'json'])
      .map((a) => `'${a}'`)
      .join(' ');
    const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stdout).toBe(0);
    // 6 originals of o1 (copies are skipped): one progress line, then the result.
    // \r, then ESC [2K (erase the line): the progress line is rewritten in place.
    expect(r.stdout).toMatch(
      new RegExp(`\r${String.fromCharCode(27)}\\[2Kcopied 6/6 \\(100%\\) {2}[\\d,]+/s {2}ETA 0s`),
    );
    expect(r.stdout).toMatch(/6 event\(s\) replayed/);
  });
});

describe('events resend|discard --filter', () => {
  let dead: string[];
  beforeAll(async () => {
    const rows = await db.query<{ id: string }>(
      `UPDATE outbox SET status = 'dead', attempts = 10, last_error = 'test'
        WHERE id IN (SELECT id FROM outbox WHERE NOT (headers ? 'x-replay-of') ORDER BY id LIMIT 5)
        RETURNING id::text AS id`,
    );
    dead = rows.map((r) => r.id);
    expect(dead).toHaveLength(5);
  });

  it('refuses a filter that names no criterion (it would touch every failed and dead row) unless --all', async () => {
    for (const action of ['resend', 'discard']) {
      const r = await ops(['events', action, '--filter', '--yes']);
      expect(r.code).toBe(EXIT.USAGE);
      expect(r.err).toMatch(/name a filter .* or pass --all/);
      expect(r.err).toContain(`usage: see \`outbox-relay events ${action} --help\``);
    }
    expect(await countRows("status = 'dead'")).toBe(5);
  });

  it('--dry-run shows what would change and changes nothing', async () => {
    const resend = await ops(['events', 'resend', '--all', '--dry-run']);
    expect(resend.code).toBe(EXIT.OK);
    expect(resend.out).toMatch(/^5 event\(s\) would be resent/);
    const discard = await ops(['events', 'discard', '--filter', '--status', 'dead', '--dry-run', '--json']);
    expect(JSON.parse(discard.out)).toEqual({ action: 'discard', dryRun: true, count: 5, ids: dead });
    expect(await countRows("status = 'dead'")).toBe(5);
    expect(resend.err).not.toMatch(/"audit":true/);
  });

  it('a filtered resend above --confirm-above asks; --yes does it', async () => {
    const refused = await ops(['events', 'resend', '--all', '--confirm-above', '2']);
    expect(refused.code).toBe(EXIT.USAGE);
    expect(await countRows("status = 'dead'")).toBe(5);
    const r = await ops(['events', 'resend', '--all', '--confirm-above', '2', '--yes']);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toMatch(/^5 event\(s\) due again now/);
    await waitFor(
      async () => (await countRows(`id = ANY('{${dead.join(',')}}') AND status = 'published'`)) === 5,
      {
        timeoutMs: 30_000,
        message: 'resent rows published by the sweeper',
      },
    );
  });
});
