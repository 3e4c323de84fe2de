/**
 * The Debezium preset's failed events, for an operator (issue 26): with insert-then-delete the
 * events exist only in the WAL, so the ones the broker refuses live in the side table
 * `outbox_relay_failed`. A real relay process (--compat debezium, --console), real PostgreSQL, the
 * run's real Kafka broker (auto-creation off) and Debian's headless Chromium: four refused events
 * become dead; `status`, /metrics and the console's overview say so; one is resent and one
 * discarded from the console, one resent and one discarded from the CLI (with its confirmation
 * rule); each outcome is read back from the side table, and the resent ones from their topics.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorEventsOf, resolveEvents } from '../../src/ops/events.ts';
import { OpsConflictError } from '../../src/ops/input-error.ts';
import { consoleRelayArgs, launchChromium } from '../support/browser.ts';
import { createDebeziumOutbox, debeziumStringArgs } from '../support/debezium-table.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { type RelayProcess, slotOf, spawnCli, spawnRelayWithHttp, testConfig } from '../support/relay.ts';

const TOKEN = 'debezium-console-token-0123456789abcdef';

const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: RelayProcess;
let base: string;
let get: Awaited<ReturnType<typeof spawnRelayWithHttp>>['get'];
let browser: Browser;
let debeziumArgs: string[];
/** The WAL position (the event's id in this mode) of each refused event, by aggregate type. */
const pos: Record<string, string> = {};
const ids: Record<string, string> = {};
const REFUSED = ['Missing', 'Gone', 'Lost', 'Void'] as const;

const cli = async (args: string[]) => {
  const p = spawnCli([...args, '--database-url', db.url, '--slot', slotOf(db), ...debeziumArgs]);
  const code = await p.exited;
  return { code, out: p.stdout(), err: p.logs() };
};

async function sideStatus(type: string): Promise<string> {
  const r = await db.query<{ status: string }>(
    `SELECT status FROM outbox_relay_failed WHERE columns ->> 'aggregatetype' = $1`,
    [type],
  );
  return r[0]!.status;
}

const sideRows = () =>
  db.query(
    `SELECT columns ->> 'aggregatetype' AS type, status, attempts, last_error FROM outbox_relay_failed`,
  );

/** A gauge's value on /metrics. */
async function gauge(line: string): Promise<number | null> {
  const text = (await get('/metrics')).text;
  const m = new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

async function loggedIn(): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await page.goto(`${base}/console/login`);
  await page.fill('input[name=token]', TOKEN);
  await page.click('button:has-text("Log in")');
  await page.waitForURL(`${base}/console/`);
  return page;
}

beforeAll(async () => {
  kafka = await startKafka();
  await createDebeziumOutbox(db);
  await kafka.createTopic('outbox.event.Order', 1);
  debeziumArgs = debeziumStringArgs(kafka);
  const r = await spawnRelayWithHttp(db, kafka.brokers, [...debeziumArgs, ...consoleRelayArgs(TOKEN)]);
  relay = r.relay;
  base = `http://127.0.0.1:${r.port}`;
  get = r.get;
  browser = await launchChromium();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  relay?.kill('SIGTERM');
  await relay?.exited;
  await kafka?.stop();
});

describe('--compat debezium: the side table for operators', () => {
  it('refused insert-then-delete events are dead in the side table; status, /metrics and the console say so', async () => {
    // Nothing failed yet: the gauges exist and count the side table (0), status reads it.
    await waitFor(async () => (await gauge('outbox_events{status="dead"}')) === 0, {
      timeoutMs: 30_000,
      message: 'the side sweeper sets the dead gauge',
    });
    const tx = await db.pool.connect();
    try {
      await tx.query('BEGIN');
      for (const type of ['Order', ...REFUSED]) {
        ids[type] = randomUUID();
        await tx.query(
          `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'Created', $4)`,
          [ids[type], type, `${type.toLowerCase()}-1`, JSON.stringify({ type, note: '<b>x</b>' })],
        );
      }
      await tx.query('DELETE FROM outbox');
      await tx.query('COMMIT');
    } finally {
      tx.release();
    }
    await waitFor(
      async () =>
        (await Promise.all(REFUSED.map(sideStatus).map((p) => p.catch(() => '')))).every((s) => s === 'dead'),
      { timeoutMs: 30_000, message: 'the four refused events dead in the side table' },
    );
    for (const r of await db.query<{ t: string; p: string }>(
      `SELECT columns ->> 'aggregatetype' AS t, wal_position::text AS p FROM outbox_relay_failed`,
    ))
      pos[r.t] = r.p;
    expect(await kafka.readAll('outbox.event.Order')).toHaveLength(1);
    // The operator fixes two of the causes now. The sink found those topics missing and looks for
    // them again every 5 s (sinks/kafka/missing-topics.ts): created here, they are known long before the
    // resends below (the checks in between wait for a health reading, 15 s). Dead events are not
    // retried by themselves.
    await kafka.createTopic('outbox.event.Missing', 1);
    await kafka.createTopic('outbox.event.Lost', 1);

    // The gauges count the side table.
    await waitFor(async () => (await gauge('outbox_events{status="dead"}')) === 4, {
      timeoutMs: 30_000,
      message: 'outbox_events{status="dead"} 4',
    });
    expect(await gauge('outbox_events{status="failed"}')).toBe(0);
    expect(await gauge('outbox_oldest_failed_age_seconds')).toBeGreaterThan(0);

    // status: unhealthy (69), the dead events of the side table, the commands that resolve them.
    const status = await cli(['status', '--json']);
    expect(status.code, status.err).toBe(69);
    const report = JSON.parse(status.out);
    expect(report.dead).toBe(4);
    expect(report.sideTable).toBe('"public"."outbox_relay_failed"');
    const dead = report.findings.find((f: { id: string }) => f.id === 'dead_events');
    expect(dead.text).toMatch(/^4 dead event\(s\) in the side table "public"\."outbox_relay_failed" \(/);
    expect(dead.text).toContain(`${kafka.topic('outbox.event.Missing')}: UNKNOWN_TOPIC_OR_PARTITION`);
    expect(dead.text).toContain('outbox-relay events list --status dead --compat debezium');
    expect(dead.fix).toContain('`outbox-relay events resend --filter --status dead --compat debezium`');

    // The console's overview: the verdict (read every 15 s), the counts, the dead events.
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${base}/console/`);
    await waitFor(
      async () => {
        await page.reload();
        return (await page.locator('[data-problem=dead_events]').count()) === 1;
      },
      { timeoutMs: 40_000, message: 'the overview shows the dead events' },
    );
    await expect(page.locator('[data-problem=dead_events] .problem').textContent()).resolves.toMatch(
      /^4 dead event\(s\) in the side table/,
    );
    expect(await page.getByTestId('counts').textContent()).toMatch(/dead\s*4/);
    const listed = await page.locator('table.events tbody tr').allTextContents();
    expect(listed).toHaveLength(4);
    for (const type of REFUSED)
      expect(listed.some((t) => t.includes(pos[type]!) && t.includes(type))).toBe(true);
    await expect(page.locator('footer').textContent()).resolves.toContain('"outbox_relay_failed"');
  });

  it('the CLI lists, counts and shows them with the filters of the normal table', async () => {
    const count = await cli(['events', 'count', '--json']);
    expect(count.code, count.err).toBe(0);
    expect(JSON.parse(count.out)).toEqual({ count: 4, byStatus: { dead: 4 } });
    const list = await cli(['events', 'list', '--json', '--aggregate-type', 'Lost', '--status', 'dead']);
    expect(list.code, list.err).toBe(0);
    const { events } = JSON.parse(list.out);
    expect(events.map((e: { id: string }) => e.id)).toEqual([pos.Lost]);
    expect(events[0]).toMatchObject({
      eventId: ids.Lost,
      aggregateId: 'lost-1',
      status: 'dead',
      attempts: 2,
    });
    const show = await cli(['events', 'show', pos.Gone!]);
    expect(show.code, show.err).toBe(0);
    expect(show.out).toMatch(/last_error\s+permanent\/UNKNOWN_TOPIC_OR_PARTITION/);
    expect(show.out).toContain(`"id":"${ids.Gone}"`);
    expect(show.out).toContain('payload (json');
    const missing = await cli(['events', 'show', '999']);
    expect(missing.code).toBe(64);
    expect(missing.err).toMatch(/event 999 does not exist in "public"\."outbox_relay_failed"/);
  });

  it('a resend or discard that would change fewer rows than selected changes none', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const events = operatorEventsOf(testConfig(db, debeziumArgs, kafka.brokers));
      // Void is dead; no row has WAL position 1: the statement matches one row of two.
      const err = await resolveEvents(client, events, 'discard', [pos.Void!, '1'], false).catch((e) => e);
      expect(err).toBeInstanceOf(OpsConflictError);
      expect(err.message).toMatch(/^discard matched 1 of the 2 event\(s\) selected: .*nothing changed/);
      expect(await sideStatus('Void')).toBe('dead');
    } finally {
      await client.end();
    }
  });

  it('the console resends one (published once its topic exists) and discards another, with the token', async () => {
    expect(await sideStatus('Missing')).toBe('dead');
    const page = await loggedIn();
    await page.goto(`${base}/console/events/${pos.Missing}`);
    await expect(page.getByTestId('remedy').textContent()).resolves.toContain(
      `topic ${kafka.topic('outbox.event.Missing')}`,
    );
    await expect(page.getByTestId('columns').textContent()).resolves.toContain(ids.Missing!);
    await expect(page.locator('main').textContent()).resolves.toContain(
      `outbox-relay events resend ${pos.Missing} --compat debezium`,
    );
    await page.click('text=Resend…');
    await expect(page.getByTestId('preview-count').textContent()).resolves.toMatch(/would resend 1 event/);
    await page.getByTestId('confirm').click();
    await expect(page.getByTestId('result').textContent()).resolves.toMatch(/1 event\(s\) due again now/);
    await waitFor(async () => (await sideStatus('Missing')) === 'published', {
      timeoutMs: 30_000,
      message: async () =>
        `the resent event published by the side sweeper (${JSON.stringify(await sideRows())})`,
    });
    const [record] = await kafka.readAll('outbox.event.Missing');
    expect(record!.key?.toString()).toBe('missing-1');
    expect(record!.headers.id?.toString()).toBe(ids.Missing);

    await page.goto(`${base}/console/events/${pos.Gone}`);
    await page.click('text=Discard…');
    await page.getByTestId('confirm').click();
    await expect(page.getByTestId('result').textContent()).resolves.toMatch(/1 event\(s\) discarded/);
    expect(await sideStatus('Gone')).toBe('discarded');
    // Audited like the CLI, naming the side table.
    await relay.waitForLog(/"audit":true,"action":"discard"/);
    const line = relay
      .logs()
      .split('\n')
      .find((l) => l.includes('"audit":true') && l.includes('"action":"discard"'))!;
    expect(JSON.parse(line)).toMatchObject({ ids: [pos.Gone], rows: 1, via: 'console' });
    expect(JSON.parse(line).table).toBe('"public"."outbox_relay_failed"');
  });

  it('the CLI resends one and discards another (discard only with --yes); the gauges and status follow', async () => {
    expect(await sideStatus('Lost')).toBe('dead');
    const resend = await cli(['events', 'resend', pos.Lost!]);
    expect(resend.code, resend.err).toBe(0);
    expect(resend.out).toMatch(/1 event\(s\) due again now/);
    // Without a terminal and without --yes: not confirmed, exit 64, nothing changed.
    const unconfirmed = await cli(['events', 'discard', pos.Void!]);
    expect(unconfirmed.code).toBe(64);
    expect(unconfirmed.err).toMatch(/not confirmed/);
    expect(await sideStatus('Void')).toBe('dead');
    const discard = await cli(['events', 'discard', pos.Void!, '--yes']);
    expect(discard.code, discard.err).toBe(0);
    expect(discard.out).toMatch(/1 event\(s\) discarded/);
    expect(discard.err).toMatch(/"audit":true,"action":"discard"/);
    // A discarded event is no longer resolvable.
    const again = await cli(['events', 'resend', pos.Void!]);
    expect(again.code).toBe(64);
    expect(again.err).toMatch(new RegExp(`event ${pos.Void} is discarded; only failed/dead events qualify`));

    await waitFor(async () => (await sideStatus('Lost')) === 'published', {
      timeoutMs: 30_000,
      message: async () => `the CLI-resent event published (${JSON.stringify(await sideRows())})`,
    });
    expect(await kafka.readAll('outbox.event.Lost')).toHaveLength(1);
    // Durable in the side table, read back in a new session.
    expect(
      await db.query(
        `SELECT columns ->> 'aggregatetype' AS type, status FROM outbox_relay_failed ORDER BY wal_position`,
      ),
    ).toEqual([
      { type: 'Missing', status: 'published' },
      { type: 'Gone', status: 'discarded' },
      { type: 'Lost', status: 'published' },
      { type: 'Void', status: 'discarded' },
    ]);
    await waitFor(async () => (await gauge('outbox_events{status="dead"}')) === 0, {
      timeoutMs: 30_000,
      message: 'the dead gauge back to 0',
    });
    expect(await gauge('outbox_oldest_failed_age_seconds')).toBe(0);
    const status = await cli(['status', '--json']);
    const report = JSON.parse(status.out);
    expect(report.dead).toBe(0);
    expect(report.findings.map((f: { id: string }) => f.id)).not.toContain('dead_events');
    expect(report.counts).toMatchObject({ published: 2, discarded: 2 });
  });
});
