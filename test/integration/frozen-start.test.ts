import { afterEach, beforeAll, expect, it } from 'vitest';
import { type SinkServer, type SinkServerName, startSinkServer } from '../../chaos/lib/sink-server.ts';
import { type KeySeq, tally } from '../../chaos/lib/tally.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, type RelayProcess, slotOf, spawnCli } from '../support/relay.ts';

/**
 * The server of each broker sink but Kafka (kafka-frozen-start.test.ts) frozen (SIGSTOP) across
 * the relay's start, then thawed. The start (for the webhook sink, whose start opens no
 * connection: the first batch) is abandoned after --sink-start-timeout-ms (2 s) while the sink's
 * own client still waits on the frozen server (its timeout: 5 s), and tried again; the server is
 * thawed after the fourth try, so both an abandoned start still waiting and one whose client
 * timed out meanwhile are behind the next. Then every event is published and read back, each
 * key's in order, none twice where the sink deduplicates. A sink whose next start trusted what an
 * abandoned one left would publish nothing after the thaw: 60 s without one more row published
 * fails the test, with the relay's logs.
 *
 * None of these sinks needed a change (Sink.abandonStart: only Kafka and Redis drop clients).
 * The servers are the chaos scenarios' (chaos/lib/sink-server.ts: set up as docs/sinks.md asks,
 * read back in the order stored); each test starts its own and stops it.
 */
const db = useTestDatabase();
let server: SinkServer | null = null;
let relay: RelayProcess | null = null;
let frozen = false;

const KEYS = 5;
const EVENTS = 100;
/** Tries while frozen: past the sink clients' own timeouts (5 s, the chaos servers' relay flags). */
const TRIES = 4;
/** The type the chaos servers route and read back (SQS: the queue Chaos.fifo). */
const TYPE = 'Chaos';

beforeAll(async () => {
  await migrateDb(db);
});

afterEach(async () => {
  if (frozen) server?.thaw();
  frozen = false;
  if (relay) {
    relay.kill('SIGKILL');
    await relay.exited;
  }
  relay = null;
  await server?.stop();
  server = null;
});

async function unpublished(ids: string[]): Promise<number> {
  const r = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM outbox_with_status WHERE id = ANY($1::bigint[]) AND status <> 'published'`,
    [ids],
  );
  return Number(r[0]!.n);
}

/**
 * EVENTS rows over KEYS keys inserted, the server frozen, the relay started with a 2 s
 * --sink-start-timeout-ms; once it logged `failed` and TRIES - 1 more tries, the server thawed;
 * then every row published, every event read back, each key's in order (`dedups`: none twice).
 */
async function frozenAcrossStart(
  name: SinkServerName,
  failed: RegExp,
  opts: { dedups: boolean; extra?: (s: SinkServer) => string[] },
): Promise<void> {
  server = await startSinkServer(name);
  // Each test's keys are its own: the file's tests share one database and slot.
  const written = Array.from({ length: EVENTS }, (_, i) => ({
    key: `${name}-k${i % KEYS}`,
    seq: Math.floor(i / KEYS),
  }));
  const ids = await insertEvents(
    db.pool,
    written.map((w) => ({
      aggregateType: TYPE,
      aggregateId: w.key,
      eventType: 'E',
      payload: JSON.stringify(w),
    })),
  );

  server.freeze();
  frozen = true;
  relay = spawnCli(
    [
      'run',
      ...['--database-url', db.url, '--slot', slotOf(db)],
      ...['--retry-initial-ms', '50', '--retry-max-ms', '500'],
      ...server.relayArgs,
      ...['--sink-start-timeout-ms', '2000'],
      ...(opts.extra?.(server) ?? []),
      // The outage's later tries are logged at debug (src/retry/outage-log.ts): counted below.
      ...['--log-level', 'debug'],
    ],
    server.relayEnv,
  );
  await relay.waitForLog(failed, 90_000);
  const retries = () => relay!.logs().match(/"msg":"broker still unavailable, retrying"/g)?.length ?? 0;
  await waitFor(() => retries() >= TRIES - 1, {
    timeoutMs: 90_000,
    message: () =>
      `${TRIES} tries while frozen (${retries() + 1} so far); relay logs:\n${relay!.logs().slice(-4000)}`,
  });
  server.thaw();
  frozen = false;
  const thawedAt = Date.now();

  // 60 s without one more row published: a wedge.
  await waitFor(async () => (await unpublished(ids)) === 0, {
    timeoutMs: 60_000,
    intervalMs: 300,
    progress: () => unpublished(ids),
    capMs: 180_000,
    message: async () =>
      `every row published (${await unpublished(ids)} of ${EVENTS} not yet, ${Date.now() - thawedAt} ms after the thaw); relay logs:\n${relay!.logs().slice(-4000)}`,
  });
  const recoveredMs = Date.now() - thawedAt;

  const read = (await server.readBack()).map((r) => JSON.parse(r.value!.toString()) as KeySeq);
  const t = tally(written, read);
  expect(t.lostSample).toEqual([]);
  expect(t.violationSample).toEqual([]);
  // RabbitMQ and webhooks store or deliver a re-sent event again (receivers deduplicate by the
  // event id, docs/sinks.md); the others drop it (duplicate window, dedup key, FIFO dedup id).
  if (opts.dedups) expect(t.duplicates, 'events stored twice').toBe(0);
  const first = relay.logs().match(failed)?.[0];
  console.log(
    `${name} frozen across ${TRIES} tries of the start: ${EVENTS} events published ${recoveredMs} ms after the thaw, ${t.duplicates} delivered twice (first failure: ${first})`,
  );
}

/** The relay's log of a start that failed or outlasted --sink-start-timeout-ms. */
function startFailed(sink: string): RegExp {
  return new RegExp(
    `"msg":"broker unavailable: (cannot start the ${sink} sink|the ${sink} sink did not start within 2000 ms)`,
  );
}

it('NATS frozen across the relay start, then thawed: every event published, in key order', async () => {
  await frozenAcrossStart('nats', startFailed('nats'), { dedups: true });
}, 300_000);

it('RabbitMQ frozen across the relay start, then thawed: every event published, in key order', async () => {
  await frozenAcrossStart('rabbitmq', startFailed('rabbitmq'), { dedups: false });
}, 300_000);

it('Redis frozen across the relay start, then thawed: every event published, in key order', async () => {
  await frozenAcrossStart('redis', startFailed('redis'), { dedups: true });
}, 300_000);

it('SQS (ElasticMQ) frozen across the relay start, then thawed: every event published, in key order', async () => {
  // A literal queue URL: the start asks the server for the queue's attributes (a templated one is
  // checked at first use).
  await frozenAcrossStart('sqs', startFailed('sqs'), {
    dedups: true,
    extra: (s) => {
      const template = s.relayArgs[s.relayArgs.indexOf('--sqs-queue-url-template') + 1]!;
      return ['--sqs-queue-url-template', template.replace('{aggregate_type}', TYPE)];
    },
  });
}, 300_000);

it('a webhook receiver frozen across the relay start, then thawed: every event published, in key order', async () => {
  // The webhook sink's start opens no connection: its first batch is what times out.
  await frozenAcrossStart('http', /no answer within 5000 ms \(--http-timeout-ms\)/, { dedups: false });
}, 300_000);
