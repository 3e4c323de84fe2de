import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ThrowawayRedis } from '../../src/dev/local-redis.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { parseLsn } from '../../src/replication/lsn.ts';
import type { OutboundMessage } from '../../src/route/event.ts';
import { RedisSink } from '../../src/sinks/redis/redis-sink.ts';
import { MAX_ENTRY_FIELDS } from '../../src/sinks/redis/stream-entry.ts';
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
import { brokerErrors, seqReport, sinkLoad } from '../support/sink-load.ts';

/**
 * The Redis Streams sink against a real redis-server of this file (never the machine's shared one
 * on 6379), appendonly yes: the relay streams real outbox rows, a separate client reads the
 * streams back by XRANGE and joins them on event id against the outbox table.
 */
const db = useTestDatabase();
const { statuses, settled, insertRounds, backgroundInserts, faultMidStream, failedEventsFix } = sinkLoad(db);
let redis: ThrowawayRedis;
let relay: Relay | null = null;
let sink: RedisSink | null = null;

const FAST = [
  '--retry-initial-ms',
  '50',
  '--retry-max-ms',
  '1000',
  '--redis-timeout-ms',
  '2000',
  '--failure-backoff-ms',
  '60000',
  '--status-interval-ms',
  '300',
];

function redisConfig(prefix: string, extra: string[] = [], url = redis.url) {
  return testConfig(db, [
    '--sink',
    'redis',
    '--redis-url',
    url,
    '--topic-template',
    `${prefix}.{aggregate_type}`,
    ...FAST,
    ...extra,
  ]);
}

async function startRelay(prefix: string, extra: string[] = [], url = redis.url): Promise<Relay> {
  const config = redisConfig(prefix, extra, url);
  sink = new RedisSink(config, silentLogger());
  relay = await startRelayInProcess(config, sink);
  await waitFor(() => relay!.state === 'streaming', { timeoutMs: 60_000, message: 'relay streaming' });
  return relay;
}

/**
 * What the stream holds of `{seq}` events: losses, entries stored twice (by event id), the per-key
 * order; and the join on event id against the outbox: every row of `ids` published and stored.
 */
async function report(stream: string, keys: number, rounds: number, ids: string[], server = redis) {
  const all = await server.readAll(stream);
  // The load's keys k0…; a fault test's marker event is counted apart.
  const stored = all.filter((e) => /^k\d+$/.test(e.fields['h:aggregate_id']!.toString()));
  const markers = all.length - stored.length;
  const seen = stored.map((e) => ({
    key: e.fields['h:aggregate_id']!.toString(),
    seq: (JSON.parse(e.fields.value!.toString()) as { seq: number }).seq,
  }));
  const byEventId = new Map<string, number>();
  for (const e of stored) {
    const id = e.fields.id!.toString();
    byEventId.set(id, (byEventId.get(id) ?? 0) + 1);
  }
  const rows = await db.query<{ event_id: string; status: string }>(
    'SELECT event_id::text, status FROM outbox_with_status WHERE id = ANY($1::bigint[])',
    [ids],
  );
  const notPublished = rows.filter((r) => r.status !== 'published').length;
  const lostByJoin = rows.filter((r) => !byEventId.has(r.event_id)).length;
  const storedTwice = [...byEventId.values()].filter((n) => n > 1).length;
  const r = seqReport(seen, keys, rounds);
  return { stored, markers, rows: rows.length, notPublished, lostByJoin, storedTwice, ...r };
}

function expectClean(rep: Awaited<ReturnType<typeof report>>, events: number) {
  expect(rep.rows).toBe(events);
  expect(rep.notPublished).toBe(0);
  expect(rep.lostByJoin).toBe(0);
  expect(rep.missing).toEqual([]);
  expect(rep.storedTwice).toBe(0);
  expect(rep.duplicates).toBe(0);
  expect(rep.violations).toEqual([]);
  expect(rep.stored).toHaveLength(events);
}

beforeAll(async () => {
  redis = await ThrowawayRedis.start();
  await migrateDb(db);
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
  await db.pool.query(`UPDATE outbox SET status = 'discarded' WHERE status IN ('failed', 'dead', 'parked')`);
});

afterAll(async () => {
  await redis?.stop();
});

describe('Redis Streams sink', () => {
  it('XADDs every event with id, type, h:<header> and value fields; a separate client reads them back in order; the slot moves past the commit', async () => {
    await startRelay('happy');
    const ids = await insertRounds('Order', 5, 40);
    const { commitLsn } = await insertEventsReportingCommit(db, [
      {
        aggregateType: 'Customer',
        aggregateId: 'c1',
        eventType: 'Created',
        payload: '{"seq":0}',
        headers: { tenant: 'acme' },
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      },
    ]);
    await settled(ids);
    const rep = await report('happy.Order', 5, 40, ids);
    expectClean(rep, 200);
    const [customer] = await redis.readAll('happy.Customer');
    expect(Object.keys(customer!.fields)).toEqual(
      expect.arrayContaining(['id', 'type', 'h:tenant', 'h:traceparent', 'h:aggregate_id', 'value']),
    );
    expect(customer!.fields.type!.toString()).toBe('Created');
    expect(customer!.fields['h:tenant']!.toString()).toBe('acme');
    expect(customer!.fields['h:traceparent']!.toString()).toBe(
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    );
    expect(customer!.fields.value!.toString()).toBe('{"seq":0}');
    // The dedup key holds the entry id, in the stream's hash slot, with a TTL of --redis-dedup-ttl-s.
    const a = await redis.admin();
    const key = `{happy.Customer}:dedup:${customer!.fields.id!.toString()}`;
    expect(await a.get(key)).toBe(customer!.entryId);
    const ttl = await a.pttl(key);
    expect(ttl).toBeGreaterThan(86_000_000);
    expect(ttl).toBeLessThanOrEqual(86_400_000);
    await waitFor(async () => parseLsn((await slotPosition(db)).confirmed) > parseLsn(commitLsn), {
      message: 'slot confirmed past the last commit',
    });
  });

  it('a batch sent again (a lost reply, a relay restart) is stored once: the script answers duplicate', async () => {
    const config = redisConfig('again');
    const direct = new RedisSink(config, silentLogger());
    await direct.start();
    onTestFinished(() => direct.stop());
    const batch: OutboundMessage[] = Array.from({ length: 20 }, (_, i) => message('again.T', `k${i % 4}`, i));
    await direct.publish(batch);
    await direct.publish(batch);
    await direct.publish(batch.slice(5, 9));
    expect(direct.duplicates).toBe(24);
    const stored = await redis.readAll('again.T');
    expect(stored.map((e) => e.fields.id!.toString())).toEqual(batch.map((m) => m.event.eventId));
  });

  it('kill -9 of redis-server mid-stream and a restart from its AOF: nothing confirmed while it is down; 0 lost, 0 stored twice, key order kept', async () => {
    const r = await startRelay('kill');
    const load = backgroundInserts('Acct', 8);
    const rounds = await faultMidStream({
      relay: r,
      load,
      stored: () => redis.length('kill.Acct'),
      flowing: 200,
      aggregateType: 'Acct',
      marker: 'during-outage',
      fault: () => redis.kill9(),
      recover: () => redis.restart(),
      roundsDuring: 20,
      roundsAfter: 40,
    });
    await settled(load.ids, 120_000);
    const rep = await report('kill.Acct', 8, rounds, load.ids);
    console.log(
      `redis kill -9: ${rounds * 8} events, ${rep.missing.length} lost, ${rep.storedTwice} stored twice, ${rep.violations.length} order violations; ${sink!.duplicates} re-sends found stored, ${sink!.connections} connections`,
    );
    expectClean(rep, rounds * 8);
    expect(rep.markers).toBe(1);
  });

  it('a frozen server (SIGSTOP): command timeouts are transient, nothing confirmed meanwhile; after SIGCONT everything is stored once, in key order', async () => {
    const r = await startRelay('freeze');
    const load = backgroundInserts('Acct', 6);
    const rounds = await faultMidStream({
      relay: r,
      load,
      stored: () => redis.length('freeze.Acct'),
      flowing: 100,
      aggregateType: 'Acct',
      marker: 'during-freeze',
      fault: async () => {
        redis.freeze();
        await redis.frozen();
      },
      recover: () => redis.thaw(),
      roundsAfter: 30,
    });
    await settled(load.ids, 120_000);
    const rep = await report('freeze.Acct', 6, rounds, load.ids);
    console.log(
      `redis SIGSTOP: ${rounds * 6} events, ${rep.missing.length} lost, ${rep.storedTwice} stored twice, ${rep.violations.length} order violations; ${sink!.duplicates} re-sends found stored`,
    );
    expectClean(rep, rounds * 6);
    expect(rep.markers).toBe(1);
  });

  it('a server frozen before the sink starts: the start fails within --redis-timeout-ms (transient), and succeeds once thawed', async () => {
    const config = redisConfig('frozen-start');
    const s = new RedisSink(config, silentLogger());
    onTestFinished(async () => {
      redis.thaw();
      await s.stop();
    });
    redis.freeze();
    await redis.frozen();
    const t0 = Date.now();
    const failed = await s.start().then(
      () => null,
      (e: unknown) => e,
    );
    const ms = Date.now() - t0;
    console.log(
      `Redis frozen at start: the start failed after ${ms} ms (--redis-timeout-ms ${config.redisTimeoutMs})`,
    );
    expect(failed).toBeInstanceOf(Error);
    expect(s.classify(failed).class).toBe('transient');
    // ioredis alone: 3 – 4 × the timeout (its handshake's commands one after another, then the close).
    expect(ms).toBeLessThan(config.redisTimeoutMs * 1.75);
    redis.thaw();
    await s.start();
  });

  it('relay kill -9 storm: every kill while scripts are in flight; 0 lost, 0 stored twice, key order kept', async () => {
    const args = [
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      '--sink',
      'redis',
      '--topic-template',
      'storm.{aggregate_type}',
      ...FAST,
    ];
    const env = { REDIS_URL: redis.url };
    const load = backgroundInserts('Storm', 10);
    onTestFinished(() => void load.stop());
    let current: RelayProcess | null = null;
    onTestFinished(() => current?.kill('SIGKILL'));
    const KILLS = 5;
    for (let k = 0; k < KILLS; k++) {
      current = spawnCli(args, env);
      await current.waitForLog(/streaming from the slot/, 60_000);
      const before = await redis.length('storm.Storm');
      await waitFor(async () => (await redis.length('storm.Storm')) >= before + 200, {
        timeoutMs: 60_000,
        message: `relay ${k} publishing`,
      });
      current.kill('SIGKILL');
      expect(await current.exited).toBe('SIGKILL');
    }
    const rounds = await load.stop();
    current = spawnCli(args, env);
    await current.waitForLog(/streaming from the slot/, 60_000);
    await settled(load.ids, 120_000);
    current.kill('SIGTERM');
    expect(await current.exited).toBe(0);
    current = null;
    const rep = await report('storm.Storm', 10, rounds, load.ids);
    console.log(
      `redis relay kill -9 storm: ${KILLS} kills, ${rounds * 10} events, ${rep.missing.length} lost, ${rep.storedTwice} stored twice, ${rep.violations.length} order violations`,
    );
    expectClean(rep, rounds * 10);
  }, 400_000);

  it('a stream key that holds another type (WRONGTYPE) fails its events permanently; other streams flow', async () => {
    await (await redis.admin()).set('wrong.Bad', 'not a stream');
    await startRelay('wrong', ['--ordering', 'relaxed']);
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'Bad', aggregateId: 'b1', eventType: 'Tick', payload: '{"seq":0}' },
      { aggregateType: 'Good', aggregateId: 'g1', eventType: 'Tick', payload: '{"seq":0}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(st.get(ids[0]!)!.status).toBe('failed');
    expect(st.get(ids[0]!)!.last_error).toMatch(/WRONGTYPE/);
    expect(st.get(ids[1]!)!.status).toBe('published');
    // `status` (and the console) say what to do about it (ops/remedies.ts).
    expect(await failedEventsFix('wrong.{aggregate_type}')).toMatch(
      /wrong\.Bad: the key wrong\.Bad .*is not a stream: see redis-cli TYPE/,
    );
    // The refused XADD left no dedup key behind: once the key is fixed, the sweeper's retry stores it.
    const a = await redis.admin();
    expect(await a.keys('{wrong.Bad}:dedup:*')).toEqual([]);
  });

  it('a row with thousands of headers: at the entry limit it is stored, one more fails it permanently (was: the script refused it, retried for good)', async () => {
    await startRelay('fields', ['--ordering', 'relaxed']);
    // entryFields: id, type, value, the relay's aggregate_type, aggregate_id and content-type, and
    // one per row header — MAX_ENTRY_FIELDS / 2 pairs at most.
    const headers = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x${i}`, 'v']));
    const atLimit = MAX_ENTRY_FIELDS / 2 - 6;
    const ids = await insertEvents(db.pool, [
      {
        aggregateType: 'Wide',
        aggregateId: 'w1',
        eventType: 'Tick',
        payload: '{"seq":0}',
        headers: headers(atLimit),
      },
      {
        aggregateType: 'Wide',
        aggregateId: 'w2',
        eventType: 'Tick',
        payload: '{"seq":0}',
        headers: headers(atLimit + 1),
      },
      {
        aggregateType: 'Wide',
        aggregateId: 'w3',
        eventType: 'Tick',
        payload: '{"seq":0}',
        headers: headers(4000),
      },
      { aggregateType: 'Wide', aggregateId: 'w1', eventType: 'Tick', payload: '{"seq":1}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual(['published', 'failed', 'failed', 'published']);
    expect(st.get(ids[1]!)!.last_error).toMatch(
      new RegExp(`TOO_MANY_FIELDS.*${MAX_ENTRY_FIELDS / 2 + 1} fields .*more than one stream entry`),
    );
    const stored = await redis.readAll('fields.Wide');
    expect(stored.map((e) => e.fields['h:aggregate_id']!.toString())).toEqual(['w1', 'w1']);
    expect(Object.keys(stored[0]!.fields)).toHaveLength(MAX_ENTRY_FIELDS / 2);
  });

  it('SCRIPT FLUSH mid-stream: NOSCRIPT reloads the script, nothing fails', async () => {
    const r = await startRelay('flush');
    const load = backgroundInserts('Acct', 4);
    await waitFor(async () => (await redis.length('flush.Acct')) >= 40, { message: 'flowing' });
    const errors = await brokerErrors(r);
    await (await redis.admin()).script('FLUSH');
    const after = load.rounds();
    await waitFor(() => load.rounds() >= after + 10, { message: 'rounds after the flush' });
    const rounds = await load.stop();
    await settled(load.ids);
    expect(await brokerErrors(r)).toBe(errors);
    expectClean(await report('flush.Acct', 4, rounds, load.ids), rounds * 4);
  });

  it('--redis-wait-replicas 1 without a replica: NOT_ENOUGH_REPLICAS is transient, nothing confirmed; a replica that joins lets it through', async () => {
    const r = await startRelay('wait', ['--redis-wait-replicas', '1', '--redis-timeout-ms', '1000']);
    const errors = await brokerErrors(r);
    const { ids, commitLsn } = await insertEventsReportingCommit(db, [
      { aggregateType: 'W', aggregateId: 'w1', eventType: 'Tick', payload: '{"seq":0}' },
    ]);
    await waitFor(async () => (await brokerErrors(r)) >= errors + 2, { message: 'WAIT refused twice' });
    const reasons = (await r.metrics.transientErrors.get()).values.map((v) => v.labels.reason);
    expect(reasons).toContain('NOT_ENOUGH_REPLICAS');
    expect(parseLsn((await slotPosition(db)).confirmed) <= parseLsn(commitLsn)).toBe(true);
    expect((await statuses(ids)).get(ids[0]!)!.status).toBe('pending');
    const replica = await ThrowawayRedis.start();
    onTestFinished(() => replica.stop());
    await (await replica.admin()).replicaof('127.0.0.1', redis.port);
    await settled(ids);
    expect((await statuses(ids)).get(ids[0]!)!.status).toBe('published');
    await waitFor(async () => (await replica.length('wait.W')) === 1, { message: 'on the replica' });
    await (await replica.admin()).replicaof('NO', 'ONE');
  });

  it('preflight: a warning when the server keeps no AOF, none when it does', async () => {
    const noAof = await ThrowawayRedis.start({ aof: false });
    onTestFinished(() => noAof.stop());
    const warnings = async (url: string) => {
      const lines: { level: number; msg: string }[] = [];
      const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
      const s = new RedisSink(redisConfig('pre', [], url), log);
      await s.start();
      await s.stop();
      return lines.filter((l) => l.level === 40).map((l) => l.msg);
    };
    expect(await warnings(redis.url)).toEqual([]);
    const [w] = await warnings(noAof.url);
    expect(w).toMatch(/no append-only file .*CONFIG SET appendonly yes/);

    // `check --sink redis`: the same warning, exit 0; the password of REDIS_URL never in its output.
    await (await noAof.admin()).config('SET', 'requirepass', 's3cret-pw');
    const url = `redis://:s3cret-pw@127.0.0.1:${noAof.port}`;
    const check = spawnCli(['check', '--database-url', db.url, '--sink', 'redis'], { REDIS_URL: url });
    expect(await check.exited).toBe(0);
    const out = check.logs() + check.stdout();
    expect(out).toMatch(/no append-only file/);
    expect(out).not.toContain('s3cret-pw');
    const wrong = spawnCli(['check', '--database-url', db.url, '--sink', 'redis'], {
      REDIS_URL: `redis://:wrong-pw@127.0.0.1:${noAof.port}`,
    });
    expect(await wrong.exited).toBe(69);
    expect(wrong.logs() + wrong.stdout()).toMatch(
      /check could not reach Redis at redis:\/\/[^ ]*127\.0\.0\.1.*WRONGPASS|NOAUTH/,
    );
    expect(wrong.logs() + wrong.stdout()).not.toContain('wrong-pw');
  });
});

describe('Redis Streams sink: an event over proto-max-bulk-len', () => {
  let small: ThrowawayRedis;
  beforeAll(async () => {
    small = await ThrowawayRedis.start({ protoMaxBulkLen: 1024 * 1024 });
  });
  afterAll(async () => {
    await small?.stop();
  });

  it('fails that event permanently before it is sent; the others, of its key too in relaxed order, are stored', async () => {
    await startRelay('big', ['--ordering', 'relaxed'], small.url);
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'Doc', aggregateId: 'd1', eventType: 'Tick', payload: '{"seq":0}' },
      {
        aggregateType: 'Doc',
        aggregateId: 'd1',
        eventType: 'Tick',
        payload: JSON.stringify({ seq: 1, pad: 'x'.repeat(1024 * 1024 + 10) }),
      },
      { aggregateType: 'Doc', aggregateId: 'd2', eventType: 'Tick', payload: '{"seq":0}' },
      { aggregateType: 'Doc', aggregateId: 'd1', eventType: 'Tick', payload: '{"seq":2}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual(['published', 'failed', 'published', 'published']);
    expect(st.get(ids[1]!)!.last_error).toMatch(/VALUE_TOO_LARGE|proto-max-bulk-len/);
    const stored = await small.readAll('big.Doc');
    expect(
      stored.map((e) => `${e.fields['h:aggregate_id']}#${JSON.parse(e.fields.value!.toString()).seq}`),
    ).toEqual(['d1#0', 'd2#0', 'd1#2']);
  });
});

describe('Redis Streams sink: maxmemory reached (noeviction)', () => {
  let full: ThrowawayRedis;
  beforeAll(async () => {
    full = await ThrowawayRedis.start();
  });
  afterAll(async () => {
    await full?.stop();
  });

  it('OOM is transient: nothing confirmed, the events stay pending; once memory is raised they are stored once, in order', async () => {
    const a = await full.admin();
    const used = Number(/used_memory:(\d+)/.exec(await a.info('memory'))![1]);
    await a.config('SET', 'maxmemory-policy', 'noeviction');
    await a.config('SET', 'maxmemory', String(used + 64 * 1024));
    // Fill what is left with a string of the test's own, so the first XADD is refused.
    await a.set('ballast', 'x'.repeat(200 * 1024)).catch(() => {});
    const r = await startRelay('oom', [], full.url);
    const errors = await brokerErrors(r);
    const { ids, commitLsn } = await insertEventsReportingCommit(
      db,
      Array.from({ length: 20 }, (_, i) => ({
        aggregateType: 'M',
        aggregateId: `k${i % 2}`,
        eventType: 'Tick',
        payload: JSON.stringify({ seq: Math.floor(i / 2) }),
      })),
    );
    await waitFor(async () => (await brokerErrors(r)) >= errors + 2, { message: 'OOM met twice' });
    const reasons = (await r.metrics.transientErrors.get()).values.map((v) => v.labels.reason);
    expect(reasons).toContain('OOM');
    expect(parseLsn((await slotPosition(db)).confirmed) <= parseLsn(commitLsn)).toBe(true);
    expect([...(await statuses(ids)).values()].every((s) => s.status === 'pending')).toBe(true);
    await a.config('SET', 'maxmemory', '0');
    await settled(ids);
    expectClean(await report('oom.M', 2, 10, ids, full), 20);
  });
});

let counter = 0;
/** An OutboundMessage built by hand, for the sink alone. */
function message(topic: string, key: string, seq: number): OutboundMessage {
  const eventId = `00000000-0000-4000-8000-${String(++counter).padStart(12, '0')}`;
  const value = Buffer.from(JSON.stringify({ seq }));
  return {
    topic,
    key,
    value,
    headers: { id: eventId, event_type: 'Tick', aggregate_type: 'T', aggregate_id: key },
    timestamp: Date.now(),
    bytes: value.length,
    event: {
      id: String(counter),
      eventId,
      aggregateType: 'T',
      aggregateId: key,
      eventType: 'Tick',
      payload: value,
      contentType: 'application/json',
      headers: {},
      traceparent: null,
      createdAt: new Date(),
      lsn: 0n,
      commitTimeMs: Date.now(),
      xid: 0,
    },
  };
}
