import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { parseLsn } from '../../src/replication/lsn.ts';
import type { OutboundMessage } from '../../src/route/event.ts';
import { HttpSink } from '../../src/sinks/http/http-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  type RelayProcess,
  slotOf,
  slotPosition,
  spawnCli,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';
import { seqReport, sinkLoad } from '../support/sink-load.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

/**
 * The HTTP (webhook) sink against a real node:http receiver of this file
 * (test/support/webhook-receiver.ts) that verifies every signature, deduplicates by webhook-id,
 * fails chosen events and is killed mid-stream. The relay streams real outbox rows; every check
 * joins what the receiver took with the outbox (outbox_with_status) by event id.
 */
const db = useTestDatabase();
const { statuses, settled, insertRounds, backgroundInserts, faultMidStream, failedEventsFix } = sinkLoad(db);
let receiver: WebhookReceiver;
let relay: Relay | null = null;
let dir: string;

/** The relay signs with both (a rotation under way); the receiver knows only the older one. */
const NEW_SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const OLD_SECRET = `whsec_${randomBytes(24).toString('base64')}`;

const FAST = [
  '--retry-initial-ms',
  '50',
  '--retry-max-ms',
  '1000',
  '--http-timeout-ms',
  '1500',
  '--failure-backoff-ms',
  '60000',
  '--status-interval-ms',
  '300',
];

/** The sweeper's tests: relaxed order, retries every ~100 ms, never dead. */
const SWEEP_FAST = [
  '--ordering',
  'relaxed',
  '--failure-backoff-ms',
  '50',
  '--failure-backoff-max-ms',
  '100',
  '--max-attempts',
  '0',
  '--sweep-interval-ms',
  '100',
];

async function startRelay(
  path: string,
  extra: string[] = [],
  url = `${receiver.url}/${path}/{topic}`,
  log = silentLogger(),
): Promise<Relay> {
  const config = testConfig(db, [
    '--sink',
    'http',
    '--http-url',
    url,
    '--http-secret-file',
    join(dir, 'secrets'),
    '--topic-template',
    `${path}.{aggregate_type}`,
    ...FAST,
    ...extra,
  ]);
  relay = await startRelayInProcess(config, new HttpSink(config, log));
  await waitFor(() => relay!.state === 'streaming', { timeoutMs: 60_000, message: 'relay streaming' });
  return relay;
}

/** The outbox rows of `ids` joined with the receiver by event id: what was lost, what it took twice. */
async function joined(ids: string[]) {
  const rows = await db.query<{ event_id: string; status: string; last_error: string | null }>(
    'SELECT event_id::text, status, last_error FROM outbox_with_status WHERE id = ANY($1::bigint[])',
    [ids],
  );
  expect(rows).toHaveLength(ids.length);
  const published = rows.filter((r) => r.status === 'published');
  return {
    rows,
    lost: published.filter((r) => !receiver.unique.has(r.event_id)).map((r) => r.event_id),
    /** Taken by the receiver while the outbox says it failed: a failure recorded for a delivered event. */
    deliveredButFailed: rows.filter((r) => r.status !== 'published' && receiver.unique.has(r.event_id)),
  };
}

/** The receiver's deliveries of one path, in arrival order, re-sent copies included. */
function seen(path: string) {
  return receiver.delivered
    .filter((d) => d.path.startsWith(`/${path}/`))
    .map((d) => ({ key: d.key, seq: d.seq }));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'http-sink-'));
  writeFileSync(join(dir, 'secrets'), `${NEW_SECRET}\n${OLD_SECRET}\n`);
  receiver = await WebhookReceiver.start([OLD_SECRET]);
  await migrateDb(db);
}, 180_000);

afterEach(async () => {
  await relay?.stop();
  relay = null;
  receiver.reset();
  // A test's failed events must not be retried into a later test's receiver paths.
  await db.pool.query(`UPDATE outbox SET status = 'discarded' WHERE status IN ('failed', 'dead', 'parked')`);
});

afterAll(async () => {
  await receiver?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('HTTP sink (webhooks)', () => {
  it('POSTs every event signed (two secrets: the receiver knows one), to its topic URL, headers encoded safely; keys in order', async () => {
    await startRelay('happy');
    const ids = await insertRounds('Order', 5, 40);
    const { ids: hostile, commitLsn } = await insertEventsReportingCommit(db, [
      {
        aggregateType: 'Customer',
        aggregateId: 'c1',
        eventType: 'Created',
        payload: '{"seq":0}',
        headers: { tenant: 'acme', city: 'Köln', 'bad\r\nname': 'v\r\nset-cookie: x', Tenant: 'other' },
      },
      {
        aggregateType: 'Customer',
        aggregateId: 'c2',
        eventType: 'Created',
        payload: '{"seq":0}',
        headers: { tenant: 'acme', city: 'Köln', 'bad\r\nname': 'v\r\nset-cookie: x' },
      },
    ]);
    await settled([...ids, ...hostile]);
    await waitFor(async () => parseLsn((await slotPosition(db)).confirmed) > parseLsn(commitLsn), {
      message: 'slot confirmed past the last commit',
    });
    const j = await joined(ids);
    expect(j.lost).toEqual([]);
    expect(j.rows.every((r) => r.status === 'published')).toBe(true);
    const orders = seen('happy').filter((s) => s.key.startsWith('k'));
    const r = seqReport(orders, 5, 40);
    expect(r.missing).toEqual([]);
    expect(r.violations).toEqual([]);
    expect(receiver.badSignatures).toBe(0);
    const one = receiver.unique.get(j.rows[0]!.event_id)!;
    expect(one.path).toBe('/happy/happy.Order');
    expect(one.headers['outbox-topic']).toBe('happy.Order');
    expect(one.headers['content-type']).toBe('application/json');
    expect(String(one.headers['webhook-signature']).split(' ')).toHaveLength(2);

    // Names differing only by case (Tenant, tenant) both arrive, the capital one escaped.
    const st = await statuses(hostile);
    expect(st.get(hostile[0]!)).toMatchObject({ status: 'published' });
    const c1 = [...receiver.unique.values()].find((d) => d.key === 'c1')!;
    expect(c1.headers['outbox-header-tenant']).toBe('acme');
    expect(c1.headers['outbox-header-%54enant']).toBe('other');
    // CR/LF and non-Latin-1 are carried, encoded (RFC 8187), never sent raw.
    expect(st.get(hostile[1]!)).toMatchObject({ status: 'published' });
    const c2 = [...receiver.unique.values()].find((d) => d.key === 'c2')!;
    expect(c2.headers['outbox-header-tenant']).toBe('acme');
    expect(c2.headers['outbox-header-city*']).toBe("UTF-8''K%C3%B6ln");
    expect(c2.headers['outbox-header-bad%0d%0aname*']).toBe("UTF-8''v%0D%0Aset-cookie%3A%20x");
    expect(c2.headers['set-cookie']).toBeUndefined();
    console.log(
      `HTTP happy path: ${ids.length + 2} events delivered, 0 lost, ${orders.length - new Set(orders.map((o) => `${o.key}#${o.seq}`)).size} duplicates, ${r.violations.length} order violations`,
    );
  });

  it('500, 429 + Retry-After (honoured), a hang past the timeout: retried until taken; 400 and 302 fail their event with the status and body; others flow in key order', async () => {
    receiver.script('k0#3', { status: 500 }, { status: 503, body: 'busy' });
    receiver.script('k1#5', { status: 429, retryAfter: '2' });
    receiver.script('k2#7', { status: 400, body: 'seq 7 is not acceptable', sticky: true });
    receiver.script('k3#2', 'hang');
    receiver.script('k4#4', { status: 302, location: 'https://elsewhere.example/hook', sticky: true });
    await startRelay('faults', ['--ordering', 'relaxed']);
    const ids = await insertRounds('Acct', 5, 12);
    await settled(ids);
    const j = await joined(ids);
    const st = await statuses(ids);
    const idOf = (k: number, s: number) => ids[s * 5 + k]!;
    expect(st.get(idOf(2, 7))!.status).toBe('failed');
    expect(st.get(idOf(2, 7))!.last_error).toMatch(
      /HTTP_400: HTTP 400 from POST .*\/faults\/faults\.Acct: seq 7 is not acceptable/,
    );
    expect(st.get(idOf(4, 4))!.status).toBe('failed');
    expect(st.get(idOf(4, 4))!.last_error).toMatch(
      /HTTP_302.*redirects are not followed.*elsewhere\.example/,
    );
    expect(j.rows.filter((r) => r.status !== 'published')).toHaveLength(2);
    // `status` (and the console) say what to do, by the status the receiver answered (ops/remedies.ts).
    const fix = await failedEventsFix('faults.{aggregate_type}');
    expect(fix).toMatch(/faults\.Acct: the receiver of topic faults\.Acct refused the event/);
    expect(fix).toMatch(/faults\.Acct: point --http-url at the address the receiver redirects to/);
    expect(j.lost).toEqual([]);
    expect(j.deliveredButFailed).toEqual([]);
    // The two failed events count as seen first, so every other event of their keys is checked in
    // order (the check reports only these two entries themselves, ahead of their keys' seq 0).
    const r = seqReport([{ key: 'k2', seq: 7 }, { key: 'k4', seq: 4 }, ...seen('faults')], 5, 12);
    expect(r.missing).toEqual([]);
    expect(
      [...receiver.unique.values()].filter((d) => ['k2#7', 'k4#4'].includes(`${d.key}#${d.seq}`)),
    ).toEqual([]);
    expect(r.violations).toEqual([
      'key k2: seq 7 arrived before seq 0',
      'key k4: seq 4 arrived before seq 0',
    ]);
    // The first attempts of each: later ones are re-sends of a batch that another event failed.
    expect(
      receiver
        .attemptsOf('k0#3')
        .map((a) => a.status)
        .slice(0, 3),
    ).toEqual([500, 503, 204]);
    expect(
      receiver
        .attemptsOf('k3#2')
        .map((a) => a.status)
        .slice(0, 2),
    ).toEqual(['hang', 204]);
    // Retry-After: 2 — the next attempt came no sooner.
    const [limited, after] = receiver.attemptsOf('k1#5');
    expect(limited!.status).toBe(429);
    expect(after!.at - limited!.at).toBeGreaterThanOrEqual(1950);
    expect(receiver.badSignatures).toBe(0);
    const all = seen('faults');
    console.log(
      `HTTP 500/429/400/302/hang: ${ids.length} events, 2 failed as scripted, 0 lost, ${all.length - new Set(all.map((o) => `${o.key}#${o.seq}`)).size} duplicates delivered, 0 order violations`,
    );
  });

  it('a 2xx whose headers cannot be read is sent again, not failed; a host placeholder a row makes invalid fails that event alone, naming the host', async () => {
    // The receiver's first answer to k1#2 is a 200 with 20 KiB of headers (past undici's 16 KiB):
    // the event may have arrived, so it must be sent again — recorded failed, it would be a
    // delivered event the sweeper re-sends and then marks dead.
    receiver.script('k1#2', { status: 200, headerBytes: 20_000 });
    // The host is the event type: the usual rows' is the receiver's address, one row's has a space.
    const port = new URL(receiver.url).port;
    await startRelay('hosttpl', ['--ordering', 'relaxed'], `http://{event_type}:${port}/hosttpl/{topic}`);
    const ids: string[] = [];
    for (let s = 0; s < 4; s++)
      ids.push(
        ...(await insertEvents(
          db.pool,
          [0, 1, 2].map((k) => ({
            aggregateType: 'Host',
            aggregateId: `k${k}`,
            eventType: '127.0.0.1',
            payload: JSON.stringify({ seq: s }),
          })),
        )),
      );
    const [bad] = await insertEvents(db.pool, [
      { aggregateType: 'Host', aggregateId: 'k9', eventType: 'Order Placed', payload: '{"seq":0}' },
    ]);
    await settled([...ids, bad!]);
    const st = await statuses([bad!]);
    expect(st.get(bad!)!.status).toBe('failed');
    expect(st.get(bad!)!.last_error).toMatch(
      new RegExp(
        `INVALID_EVENT.*the host of --http-url, "\\{event_type\\}:${port}", is "Order%20Placed:${port}" for this event, not a valid host`,
      ),
    );
    const j = await joined(ids);
    expect(j.rows.every((r) => r.status === 'published')).toBe(true);
    expect(j.lost).toEqual([]);
    expect(j.deliveredButFailed).toEqual([]);
    const attempts = receiver.attemptsOf('k1#2').map((a) => a.status);
    expect(attempts[0]).toBe(200);
    expect(attempts.slice(1)).toContain(204);
    const r = seqReport(seen('hosttpl'), 3, 4);
    expect(r.missing).toEqual([]);
    expect(r.violations).toEqual([]);
  });

  it("a token in the webhook URL's path or query reaches the receiver, never the outbox's last_error or the logs", async () => {
    const token = 'pQ9xR2sT8uV7wX6yZ5aB4cD3';
    receiver.script('k1#1', { status: 400, body: 'no', sticky: true });
    const lines: string[] = [];
    const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(l) });
    await startRelay(
      'tok',
      ['--ordering', 'relaxed'],
      `${receiver.url}/tok/${token}/{topic}?code=Zz${token}`,
      log,
    );
    const ids = await insertRounds('Tok', 2, 2);
    await settled(ids);
    const st = await statuses(ids);
    const failed = [...st.values()].filter((r) => r.status === 'failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.last_error).toMatch(
      /HTTP 400 from POST http:\/\/127\.0\.0\.1:\d+\/tok\/\*\*\*\/tok\.Tok: no/,
    );
    // Delivered to the URL as configured, token and query included.
    expect(receiver.delivered.length).toBeGreaterThanOrEqual(3);
    for (const d of receiver.delivered) expect(d.path).toBe(`/tok/${token}/tok.Tok?code=Zz${token}`);
    expect(lines.some((l) => l.includes('webhook sink ready'))).toBe(true);
    expect(lines.join('\n')).not.toContain(token);
    const rows = await db.query<{ last_error: string | null }>(
      'SELECT last_error FROM outbox WHERE id = ANY($1::bigint[])',
      [ids],
    );
    expect(rows.map((r) => r.last_error ?? '').join('\n')).not.toContain(token);
  });

  it('sweeper: a retry the receiver took stays published while a later retry of the round meets 503 for good (no re-send each round)', async () => {
    // Both events refused (400) until both are recorded failed; then k0#0 is taken and k1#0 is
    // answered 503 at every retry. The sweeper claims k0#0 first (id order) in each round.
    receiver.script('k0#0', { status: 400, body: 'not yet', sticky: true });
    receiver.script('k1#0', { status: 400, body: 'not yet', sticky: true });
    await startRelay('sweep', SWEEP_FAST);
    const ids = await insertRounds('Sweep', 2, 1);
    await waitFor(async () => [...(await statuses(ids)).values()].every((r) => r.status === 'failed'), {
      timeoutMs: 30_000,
      message: 'both recorded failed',
    });
    receiver.script('k1#0', { status: 503, sticky: true });
    receiver.script('k0#0');
    const refused = receiver.attemptsOf('k0#0').length;
    await waitFor(async () => (await statuses([ids[0]!])).get(ids[0]!)!.status === 'published', {
      timeoutMs: 30_000,
      message: async () =>
        `k0#0 published by a retry: ${JSON.stringify([...(await statuses(ids)).values()])} ${JSON.stringify(receiver.attempts)}`,
    });
    // Five more rounds in which k1#0 met its 503 (each of them claimed k0#0's row before, when
    // the round's work was rolled back).
    const after = receiver.attemptsOf('k1#0').length;
    await waitFor(() => receiver.attemptsOf('k1#0').length >= after + 5, {
      timeoutMs: 30_000,
      message: 'five more sweep rounds meeting the 503',
    });
    expect(receiver.attemptsOf('k0#0').map((a) => a.status)).toEqual([...Array(refused).fill(400), 204]);
    expect(receiver.delivered.filter((d) => d.key === 'k0' && d.path.startsWith('/sweep/'))).toHaveLength(1);
    const st = await statuses(ids);
    expect(st.get(ids[0]!)!.status).toBe('published');
    expect(st.get(ids[1]!)!.status).toBe('failed');
    expect(st.get(ids[1]!)!.last_error).toMatch(/HTTP_400/); // a transient answer burns no attempt
  });

  it("sweeper: a receiver answering 503 for now holds back only its own retries; another URL's failed events are retried in the same rounds", async () => {
    // Two destinations ({topic} in the URL): aggregate type Down's and Up's. Both events refused
    // (400) until recorded failed; then Down's receiver answers 503 at every retry, Up's takes it.
    receiver.script('k0#0', { status: 400, body: 'not yet', sticky: true });
    receiver.script('k1#0', { status: 400, body: 'not yet', sticky: true });
    await startRelay('hol', SWEEP_FAST);
    // Down's row first: the sweeper claims it first (id order) in every round.
    const [down] = await insertRounds('Down', 1, 1);
    const up = (
      await insertEvents(db.pool, [
        { aggregateType: 'Up', aggregateId: 'k1', eventType: 'Tick', payload: JSON.stringify({ seq: 0 }) },
      ])
    )[0]!;
    await waitFor(
      async () => [...(await statuses([down!, up])).values()].every((r) => r.status === 'failed'),
      {
        timeoutMs: 30_000,
        message: 'both recorded failed',
      },
    );
    receiver.script('k0#0', { status: 503, sticky: true });
    receiver.script('k1#0');
    await waitFor(async () => (await statuses([up])).get(up)!.status === 'published', {
      timeoutMs: 30_000,
      message: "Up's event published by a retry while Down's receiver answers 503",
    });
    expect((await statuses([down!])).get(down!)!.status).toBe('failed');
    expect(receiver.attemptsOf('k0#0').some((a) => a.status === 503)).toBe(true);
    expect(receiver.delivered.filter((d) => d.path.startsWith('/hol/hol.Up'))).toHaveLength(1);
  });

  it('sweeper: while three receivers answer 503 (the round stops), the status gauges still count a new failed event', async () => {
    // Three destinations' events refused (400) until recorded failed, then 503 at every retry: a
    // third refusing destination stops each round before its end.
    for (const k of ['k0#0', 'k1#0', 'k2#0'])
      receiver.script(k, { status: 400, body: 'not yet', sticky: true });
    const r = await startRelay('gauge', SWEEP_FAST);
    const failedGauge = async () =>
      (await r.metrics.failures.events.get()).values.find((v) => v.labels.status === 'failed')?.value;
    const downs = await Promise.all(
      ['A', 'B', 'C'].map(
        async (t, k) =>
          (
            await insertEvents(db.pool, [
              {
                aggregateType: t,
                aggregateId: `k${k}`,
                eventType: 'Tick',
                payload: JSON.stringify({ seq: 0 }),
              },
            ])
          )[0]!,
      ),
    );
    await waitFor(async () => [...(await statuses(downs)).values()].every((x) => x.status === 'failed'), {
      timeoutMs: 30_000,
      message: 'three recorded failed',
    });
    for (const k of ['k0#0', 'k1#0', 'k2#0']) receiver.script(k, { status: 503, sticky: true });
    await waitFor(() => receiver.attemptsOf('k2#0').some((a) => a.status === 503), {
      timeoutMs: 30_000,
      message: 'the rounds meeting three refusing receivers',
    });
    // A fourth event, refused for good by the stream while the rounds keep stopping.
    receiver.script('k3#0', { status: 400, body: 'no', sticky: true });
    const [fourth] = await insertEvents(db.pool, [
      { aggregateType: 'D', aggregateId: 'k3', eventType: 'Tick', payload: JSON.stringify({ seq: 0 }) },
    ]);
    await waitFor(async () => (await statuses([fourth!])).get(fourth!)!.status === 'failed', {
      timeoutMs: 30_000,
      message: 'the fourth recorded failed',
    });
    await waitFor(async () => (await failedGauge()) === 4, {
      timeoutMs: 30_000,
      message: 'outbox_events{status="failed"} counting 4 while the rounds stop',
    });
    expect(receiver.attemptsOf('k0#0').filter((a) => a.status === 503).length).toBeGreaterThan(0);
  });

  it('the receiver killed mid-stream and restarted: nothing confirmed while it is down, 0 lost, key order kept (duplicates counted)', async () => {
    const r = await startRelay('kill');
    const load = backgroundInserts('Killed', 8);
    onTestFinished(() => void load.stop());
    const path = (d: { path: string }) => d.path.startsWith('/kill/');
    const rounds = await faultMidStream({
      relay: r,
      load,
      stored: async () => [...receiver.unique.values()].filter(path).length,
      flowing: 200,
      aggregateType: 'Killed',
      marker: 'during-outage',
      fault: () => receiver.kill(),
      recover: () => receiver.restart(),
      roundsDuring: 10,
      roundsAfter: 30,
    });
    await settled(load.ids, 120_000);
    const j = await joined(load.ids);
    expect(j.lost).toEqual([]);
    expect(j.rows.every((x) => x.status === 'published')).toBe(true);
    const rep = seqReport(
      seen('kill').filter((s) => s.key !== 'during-outage'),
      8,
      rounds,
    );
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
    expect([...receiver.unique.values()].some((d) => d.key === 'during-outage')).toBe(true);
    expect(receiver.badSignatures).toBe(0);
    console.log(
      `HTTP receiver killed: ${rounds * 8} events, 0 lost, ${rep.duplicates} duplicates delivered, ${rep.violations.length} order violations`,
    );
  }, 300_000);

  it('--http-batch-size 20: JSON arrays of one URL, each element verified and deduplicated by its id; a 500 on one batch re-sends it; key order kept', async () => {
    receiver.script('k1#9', { status: 500 });
    await startRelay('batch', ['--http-batch-size', '20']);
    const ids = await insertRounds('Batch', 4, 50);
    await settled(ids);
    const j = await joined(ids);
    expect(j.lost).toEqual([]);
    expect(j.rows.every((x) => x.status === 'published')).toBe(true);
    const rep = seqReport(seen('batch'), 4, 50);
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
    const batches = receiver.attempts.filter(
      (a) => a.keys.some((k) => k.startsWith('k')) && a.webhookId.startsWith('batch_'),
    );
    expect(batches.length).toBeGreaterThan(0);
    expect(Math.max(...batches.map((b) => b.keys.length))).toBeLessThanOrEqual(20);
    expect(
      receiver
        .attemptsOf('k1#9')
        .map((a) => a.status)
        .slice(0, 2),
    ).toEqual([500, 204]);
    const d = [...receiver.unique.values()].find((x) => x.path === '/batch/batch.Batch')!;
    expect(d.headers['content-type']).toBe('application/json');
    expect(receiver.badSignatures).toBe(0);
  });
  it('relay kill -9 storm (the CLI, secret from WEBHOOK_SECRET_FILE): every kill with requests in flight; 0 lost, key order kept (duplicates counted)', async () => {
    const args = [
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      '--sink',
      'http',
      '--http-url',
      `${receiver.url}/storm/{topic}`,
      '--topic-template',
      'storm.{aggregate_type}',
      ...FAST,
    ];
    const env = { WEBHOOK_SECRET_FILE: join(dir, 'secrets') };
    const load = backgroundInserts('Storm', 10);
    onTestFinished(() => void load.stop());
    let current: RelayProcess | null = null;
    onTestFinished(() => current?.kill('SIGKILL'));
    const taken = () => [...receiver.unique.values()].filter((d) => d.path.startsWith('/storm/')).length;
    const KILLS = 3;
    for (let k = 0; k < KILLS; k++) {
      current = spawnCli(args, env);
      await current.waitForLog(/streaming from the slot/, 60_000);
      const before = taken();
      await waitFor(() => taken() >= before + 200, { timeoutMs: 60_000, message: `relay ${k} publishing` });
      current.kill('SIGKILL');
      expect(await current.exited).toBe('SIGKILL');
    }
    const rounds = await load.stop();
    current = spawnCli(args, env);
    await current.waitForLog(/streaming from the slot/, 60_000);
    await settled(load.ids, 120_000);
    current.kill('SIGTERM');
    expect(await current.exited).toBe(0);
    expect(current.logs()).not.toContain(NEW_SECRET.slice(6));
    expect(current.logs()).not.toContain(OLD_SECRET.slice(6));
    current = null;
    const j = await joined(load.ids);
    expect(j.lost).toEqual([]);
    expect(j.rows.every((x) => x.status === 'published')).toBe(true);
    const rep = seqReport(seen('storm'), 10, rounds);
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
    expect(receiver.badSignatures).toBe(0);
    console.log(
      `HTTP relay kill -9 storm: ${KILLS} kills, ${rounds * 10} events, 0 lost, ${rep.duplicates} duplicates delivered, ${rep.violations.length} order violations`,
    );
  }, 400_000);

  it('check: the receiver answering passes (no event sent); a dead port, a missing secret and a bad URL fail naming the fix', async () => {
    const base = ['check', '--database-url', db.url, '--slot', slotOf(db), '--sink', 'http'];
    const env = { WEBHOOK_SECRET_FILE: join(dir, 'secrets') };
    const ok = spawnCli([...base, '--http-url', `${receiver.url}/check/{topic}`], env);
    expect(await ok.exited).toBe(0);
    expect(ok.logs()).toMatch(/webhook receiver answered/);
    expect(receiver.delivered).toEqual([]);
    const dead = spawnCli([...base, '--http-url', 'http://127.0.0.1:1/hook'], env);
    expect(await dead.exited).toBe(69);
    expect(dead.logs() + dead.stdout()).toMatch(
      /could not reach the webhook receiver http:\/\/127\.0\.0\.1:1\/hook: .*ECONNREFUSED[\s\S]*--http-ca-file/,
    );
    const noSecret = spawnCli([...base, '--http-url', `${receiver.url}/x`]);
    expect(await noSecret.exited).toBe(78);
    expect(noSecret.logs() + noSecret.stdout()).toMatch(
      /--http-secret .*is required with --sink http: set WEBHOOK_SECRET_FILE/,
    );
    // A bad flag is a usage error (64); the same value from the environment would be 78.
    const badUrl = spawnCli([...base, '--http-url', 'ftp://hooks/{topik}'], env);
    expect(await badUrl.exited).toBe(64);
    expect(badUrl.logs() + badUrl.stdout()).toMatch(/unknown placeholder "\{topik\}"/);
  });
  it('https with --http-ca-file: a receiver whose certificate a private CA signed is reached; without the CA the TLS failure is transient (nothing lost)', async () => {
    // A CA and a server certificate for 127.0.0.1, made with the machine's openssl.
    const tls = join(dir, 'tls');
    mkdirSync(tls, { recursive: true });
    const ssl = (...a: string[]) => execFileSync('openssl', a, { cwd: tls, stdio: 'ignore' });
    ssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '1',
      '-subj',
      '/CN=relay-test-ca',
    );
    ssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'srv.key',
      '-out',
      'srv.csr',
      '-subj',
      '/CN=127.0.0.1',
    );
    writeFileSync(join(tls, 'ext'), 'subjectAltName=IP:127.0.0.1\n');
    ssl(
      'x509',
      '-req',
      '-in',
      'srv.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      'srv.pem',
      '-days',
      '1',
      '-extfile',
      'ext',
    );
    const got: string[] = [];
    const server = createHttpsServer(
      { key: readFileSync(join(tls, 'srv.key')), cert: readFileSync(join(tls, 'srv.pem')) },
      (req, res) => {
        got.push(String(req.headers['webhook-id']));
        req.resume();
        req.on('end', () => res.writeHead(204).end());
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    onTestFinished(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/{topic}`;
    const sinkWith = (extra: string[]) => {
      const { config } = loadConfig(
        'run',
        [
          '--database-url',
          db.url,
          '--sink',
          'http',
          '--http-url',
          url,
          '--http-secret-file',
          join(dir, 'secrets'),
          '--http-timeout-ms',
          '3000',
          ...extra,
        ],
        {},
      );
      return new HttpSink(config, silentLogger());
    };
    const m: OutboundMessage = {
      topic: 'tls.Order',
      key: 'o1',
      value: Buffer.from('{"seq":0}'),
      headers: { id: 'e1' },
      timestamp: Date.now(),
      bytes: 0,
      event: {
        id: '1',
        eventId: 'tls-event-1',
        aggregateType: 'Order',
        aggregateId: 'o1',
        eventType: 'Created',
        payload: null,
        contentType: 'application/json',
        headers: {},
        traceparent: null,
        createdAt: new Date(),
        lsn: 0n,
        commitTimeMs: 0,
        xid: 0,
      },
    };
    const untrusting = sinkWith([]);
    try {
      const e = await untrusting.publish([m]).then(
        () => null,
        (err: unknown) => err,
      );
      expect(untrusting.classify(e)).toMatchObject({ class: 'transient', reason: 'CONNECTION' });
      expect(untrusting.classify(e).message).toMatch(/certificate/i);
      expect(got).toEqual([]);
    } finally {
      await untrusting.stop();
    }
    const trusting = sinkWith(['--http-ca-file', join(tls, 'ca.pem')]);
    try {
      await trusting.publish([m]);
      expect(got).toEqual(['tls-event-1']);
    } finally {
      await trusting.stop();
    }
  });
});
