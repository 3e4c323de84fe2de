import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { parseLsn } from '../../src/replication/lsn.ts';
import { RabbitMqSink } from '../../src/sinks/rabbitmq/rabbitmq-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { ThrowawayRabbit } from '../support/rabbitmq-server.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  orderViolations,
  type RelayProcess,
  slotOf,
  slotPosition,
  spawnCli,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';
import { brokerErrors, seqReport, sinkLoad } from '../support/sink-load.ts';

/**
 * The RabbitMQ sink against a real RabbitMQ node of this file (never the machine's shared one):
 * the relay streams real outbox rows, the test drains the queues with basic.get.
 */
const db = useTestDatabase();
const { statuses, statusSummary, settled, insertRounds, backgroundInserts, faultMidStream } = sinkLoad(db);
let rabbit: ThrowawayRabbit;
let relay: Relay | null = null;

const MAX_MESSAGE_SIZE = 16_384;

const FAST = [
  '--retry-initial-ms',
  '50',
  '--retry-max-ms',
  '1000',
  '--rabbitmq-timeout-ms',
  '2000',
  '--failure-backoff-ms',
  '60000',
  '--status-interval-ms',
  '300',
];

function rabbitConfig(exchange: string, extra: string[] = []) {
  return testConfig(db, [
    '--sink',
    'rabbitmq',
    '--rabbitmq-url',
    rabbit.url,
    '--rabbitmq-exchange',
    exchange,
    '--topic-template',
    `${exchange}.{aggregate_type}`,
    ...FAST,
    ...extra,
  ]);
}

async function startRelay(exchange: string, extra: string[] = []): Promise<Relay> {
  const config = rabbitConfig(exchange, extra);
  relay = await startRelayInProcess(config, new RabbitMqSink(config, silentLogger()));
  await waitFor(() => relay!.state === 'streaming', { timeoutMs: 60_000, message: 'relay streaming' });
  return relay;
}

async function report(queue: string, keys: number, rounds: number) {
  const stored = await rabbit.drain(queue);
  const seen = stored.map((m) => ({
    key: String(m.headers.aggregate_id ?? ''),
    seq: (JSON.parse(m.content.toString()) as { seq: number }).seq,
  }));
  return { stored, ...seqReport(seen, keys, rounds) };
}

/** The queue's contents with re-sent copies left out, checking that no copy came before an earlier event. */
function inOrderOnce(stored: { content: Buffer; headers: Record<string, unknown> }[]): string[] {
  const seen = stored.map((m) => ({
    key: String(m.headers.aggregate_id),
    seq: (JSON.parse(m.content.toString()) as { seq: number }).seq,
  }));
  expect(orderViolations(seen)).toEqual([]);
  return [...new Set(stored.map((m) => m.content.toString()))];
}

beforeAll(async () => {
  rabbit = await ThrowawayRabbit.start({ maxMessageSize: MAX_MESSAGE_SIZE, management: true });
  await migrateDb(db);
}, 180_000);

afterEach(async () => {
  await relay?.stop();
  relay = null;
  // A test's failed events must not be retried by a later test's sweeper into that test's
  // destinations (its template routes them there): the file's tests share one database.
  await db.pool.query(`UPDATE outbox SET status = 'discarded' WHERE status IN ('failed', 'dead', 'parked')`);
});

afterAll(async () => {
  await rabbit?.stop();
});

describe('RabbitMQ sink', () => {
  it('publishes every event persistent, mandatory, message_id = event id, with its headers; the queue holds them in key order', async () => {
    await rabbit.exchangeWithQueue('happy', 'happy-q', 'happy.#');
    await startRelay('happy');
    const ids = await insertRounds('Order', 5, 40);
    const { commitLsn } = await insertEventsReportingCommit(db, [
      {
        aggregateType: 'Customer',
        aggregateId: 'c1',
        eventType: 'Created',
        payload: '{"seq":0}',
        headers: { tenant: 'acme' },
      },
    ]);
    await settled(ids);
    await waitFor(async () => parseLsn((await slotPosition(db)).confirmed) > parseLsn(commitLsn), {
      message: 'slot confirmed past the last commit',
    });
    const r = await report('happy-q', 5, 40);
    expect(r.missing).toEqual([]);
    expect(r.violations).toEqual([]);
    expect(r.duplicates).toBe(0);
    const orders = r.stored.filter((m) => m.routingKey === 'happy.Order');
    expect(orders).toHaveLength(200);
    expect(orders.every((m) => m.persistent)).toBe(true);
    const eventIds = await db.query<{ event_id: string }>(
      'SELECT event_id::text FROM outbox WHERE id = ANY($1::bigint[])',
      [ids],
    );
    expect(new Set(orders.map((m) => m.messageId))).toEqual(new Set(eventIds.map((e) => e.event_id)));
    const customer = r.stored.find((m) => m.routingKey === 'happy.Customer');
    expect(customer?.headers.tenant).toBe('acme');
  });

  it('an unroutable event (no queue bound for its routing key) is returned and fails permanently; the others flow', async () => {
    await rabbit.exchangeWithQueue('route', 'route-q', 'route.Bound');
    await startRelay('route', ['--ordering', 'relaxed']);
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'Bound', aggregateId: 'b1', eventType: 'Tick', payload: '{"seq":0}' },
      { aggregateType: 'Nowhere', aggregateId: 'n1', eventType: 'Tick', payload: '{"seq":0}' },
      { aggregateType: 'Bound', aggregateId: 'b1', eventType: 'Tick', payload: '{"seq":1}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual(['published', 'failed', 'published']);
    expect(st.get(ids[1]!)!.last_error).toMatch(/UNROUTABLE|NO_ROUTE/);
    // The refused batch is sent again event by event to find the culprit: d1/b1's events may come twice.
    expect(inOrderOnce(await rabbit.drain('route-q'))).toEqual(['{"seq":0}', '{"seq":1}']);
  });

  it('a message over max_message_size fails permanently (406); the others flow', async () => {
    await rabbit.exchangeWithQueue('big', 'big-q', 'big.#');
    await startRelay('big', ['--ordering', 'relaxed']);
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'Doc', aggregateId: 'd1', eventType: 'Tick', payload: '{"seq":0}' },
      {
        aggregateType: 'Doc',
        aggregateId: 'd2',
        eventType: 'Tick',
        payload: JSON.stringify({ pad: 'x'.repeat(MAX_MESSAGE_SIZE * 2) }),
      },
      { aggregateType: 'Doc', aggregateId: 'd1', eventType: 'Tick', payload: '{"seq":1}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual(['published', 'failed', 'published']);
    expect(st.get(ids[1]!)!.last_error).toMatch(/AMQP_406|max_message_size|PRECONDITION/);
    // The refused batch is sent again event by event to find the culprit: d1/b1's events may come twice.
    expect(inOrderOnce(await rabbit.drain('big-q'))).toEqual(['{"seq":0}', '{"seq":1}']);
  });

  it('a full queue (x-overflow reject-publish) nacks: the relay retries, confirms nothing past it, and delivers everything in order once there is room', async () => {
    await rabbit.exchangeWithQueue('full', 'full-q', 'full.#', {
      arguments: { 'x-max-length': 10, 'x-overflow': 'reject-publish' },
    });
    const r = await startRelay('full');
    const ids = await insertRounds('Acct', 2, 5); // exactly fills the queue
    await settled(ids);
    const errorsBefore = await brokerErrors(r);
    const { ids: more, commitLsn } = await insertEventsReportingCommit(db, [
      { aggregateType: 'Acct', aggregateId: 'k0', eventType: 'Tick', payload: '{"seq":5}' },
      { aggregateType: 'Acct', aggregateId: 'k1', eventType: 'Tick', payload: '{"seq":5}' },
    ]);
    await waitFor(async () => (await brokerErrors(r)) >= errorsBefore + 2, {
      timeoutMs: 30_000,
      message: 'the relay meets the nacks',
    });
    expect(parseLsn((await slotPosition(db)).confirmed) <= parseLsn(commitLsn)).toBe(true);
    expect([...(await statuses(more)).values()].map((s) => s.status)).toEqual(['pending', 'pending']);
    const first = await rabbit.drain('full-q');
    await settled(more);
    const rest = await rabbit.drain('full-q');
    const seen = [...first, ...rest].map((m) => ({
      key: String(m.headers.aggregate_id),
      seq: (JSON.parse(m.content.toString()) as { seq: number }).seq,
    }));
    expect(orderViolations(seen)).toEqual([]);
    expect(new Set(seen.map((s) => `${s.key}#${s.seq}`)).size).toBe(12);
  });

  it('kill -9 of the node mid-stream: nothing confirmed while it is down, 0 lost, key order kept (duplicates counted)', async () => {
    await rabbit.exchangeWithQueue('kill', 'kill-q', 'kill.#');
    const relay = await startRelay('kill');
    const load = backgroundInserts('Killed', 8);
    onTestFinished(() => void load.stop());
    const rounds = await faultMidStream({
      relay,
      load,
      stored: () => rabbit.queueLength('kill-q'),
      flowing: 200,
      aggregateType: 'Killed',
      marker: 'during-outage',
      fault: () => rabbit.kill9(),
      recover: () => rabbit.restart(),
      roundsDuring: 20,
      roundsAfter: 40,
    });
    await settled(load.ids, 180_000);
    const rep = await report('kill-q', 8, rounds);
    console.log(`RabbitMQ kill -9: ${rounds * 8} events, ${rep.duplicates} duplicates in the queue`);
    // The outbox's statuses are read only when something is missing (a query of every id).
    const why =
      rep.missing.length > 0
        ? `not in the queue; the outbox says: ${await statusSummary(load.ids)}; the node's errors since its restart:\n${rabbit.errorLines()}`
        : '';
    expect(rep.missing, why).toEqual([]);
    expect(rep.violations).toEqual([]);
    expect(rep.stored.some((m) => m.headers.aggregate_id === 'during-outage')).toBe(true);
  }, 400_000);

  it('a frozen node (SIGSTOP): confirm timeouts are transient, nothing confirmed meanwhile, everything arrives in key order after SIGCONT', async () => {
    await rabbit.exchangeWithQueue('freeze', 'freeze-q', 'freeze.#');
    const relay = await startRelay('freeze');
    const load = backgroundInserts('Frozen', 6);
    onTestFinished(() => void load.stop());
    const rounds = await faultMidStream({
      relay,
      load,
      stored: () => rabbit.queueLength('freeze-q'),
      flowing: 100,
      aggregateType: 'Frozen',
      marker: 'during-freeze',
      fault: () => rabbit.freeze(),
      recover: () => rabbit.thaw(),
      roundsAfter: 30,
    });
    await settled(load.ids, 180_000);
    const rep = await report('freeze-q', 6, rounds);
    console.log(`RabbitMQ SIGSTOP: ${rounds * 6} events, ${rep.duplicates} duplicates in the queue`);
    const why =
      rep.missing.length > 0 ? `not in the queue; the outbox says: ${await statusSummary(load.ids)}` : '';
    expect(rep.missing, why).toEqual([]);
    expect(rep.violations).toEqual([]);
  }, 400_000);

  it('relay kill -9 storm: every kill with confirms in flight; 0 lost, key order kept (duplicates counted)', async () => {
    await rabbit.exchangeWithQueue('storm', 'storm-q', 'storm.#');
    const args = [
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      '--sink',
      'rabbitmq',
      '--rabbitmq-exchange',
      'storm',
      '--topic-template',
      'storm.{aggregate_type}',
      ...FAST,
    ];
    const env = { RABBITMQ_URL: rabbit.url };
    const load = backgroundInserts('Storm', 10);
    onTestFinished(() => void load.stop());
    let current: RelayProcess | null = null;
    onTestFinished(() => current?.kill('SIGKILL'));
    const KILLS = 5;
    for (let k = 0; k < KILLS; k++) {
      current = spawnCli(args, env);
      await current.waitForLog(/streaming from the slot/, 60_000);
      const before = await rabbit.queueLength('storm-q');
      await waitFor(async () => (await rabbit.queueLength('storm-q')) >= before + 200, {
        timeoutMs: 60_000,
        message: `relay ${k} publishing`,
      });
      current.kill('SIGKILL');
      expect(await current.exited).toBe('SIGKILL');
    }
    const rounds = await load.stop();
    current = spawnCli(args, env);
    await current.waitForLog(/streaming from the slot/, 60_000);
    await settled(load.ids, 180_000);
    current.kill('SIGTERM');
    expect(await current.exited).toBe(0);
    current = null;
    const rep = await report('storm-q', 10, rounds);
    console.log(
      `RabbitMQ relay kill -9 storm: ${KILLS} kills, ${rounds * 10} events, ${rep.duplicates} duplicates`,
    );
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
  }, 400_000);

  it('preflight with --rabbitmq-management-url: a warning names each classic queue bound to the exchange, none for a quorum one; skipped without the URL, a warning when the API does not answer', async () => {
    await rabbit.exchangeWithQueue('mgmt-x', 'mgmt-classic', 'mgmt-x.#', {
      arguments: { 'x-queue-type': 'classic' },
    });
    await rabbit.exchangeWithQueue('mgmt-x', 'mgmt-quorum', 'mgmt-x.#', {
      arguments: { 'x-queue-type': 'quorum' },
    });
    const preflight = async (extra: string[]) => {
      const lines: { level: number; msg: string; queue?: string }[] = [];
      const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
      const sink = new RabbitMqSink(rabbitConfig('mgmt-x', extra), log);
      try {
        await sink.start();
      } finally {
        await sink.stop();
      }
      return lines.filter((l) => l.level >= 40);
    };
    const warned = await preflight(['--rabbitmq-management-url', rabbit.managementUrl]);
    expect(warned.map((w) => w.queue)).toEqual(['mgmt-classic']);
    expect(warned[0]!.msg).toMatch(/"mgmt-classic" .* is a classic queue: .*x-queue-type=quorum/);
    expect(await preflight([])).toEqual([]);
    const down = await preflight(['--rabbitmq-management-url', 'http://127.0.0.1:1']);
    expect(down.map((w) => w.msg)).toEqual([
      'RabbitMQ management API did not answer: the queue-type check (classic vs quorum) is skipped',
    ]);
  });

  it('preflight: a missing exchange is a clear error naming the option', async () => {
    const sink = new RabbitMqSink(rabbitConfig('absent'), silentLogger());
    try {
      await expect(sink.start()).rejects.toThrow(
        /exchange "absent" does not exist: declare it .*--rabbitmq-exchange/,
      );
    } finally {
      await sink.stop();
    }
  });
});
