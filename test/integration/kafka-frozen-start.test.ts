import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, type RelayProcess, spawnRelay } from '../support/relay.ts';

/**
 * A broker frozen (SIGSTOP) across the relay's start, then thawed. kafkajs 2.2.4 keeps the socket
 * of a broker whose first ApiVersions request timed out: "connected", but without request
 * versions, so every later request on it fails `Broker not connected` until the broker closes the
 * idle socket (connections.max.idle.ms, 10 minutes). Before the fix the sink's start never
 * recovered (0 of 200 events published a minute after the thaw); now a failed connect drops the
 * producer and the next attempt connects afresh (src/sinks/kafka/kafka-sink.ts).
 */
const db = useTestDatabase();
let kafka: DedicatedKafka;
let relay: RelayProcess | null = null;
let frozen = false;

const KEYS = 10;
const EVENTS = 200;

beforeAll(async () => {
  [kafka] = await Promise.all([startDedicatedKafka(), migrateDb(db)]);
  await Promise.all(['Frozen', 'Hung', 'Once'].map((t) => kafka.createTopic(`outbox.event.${t}`, 3)));
});

afterEach(async () => {
  if (frozen) kafka.cluster.signal(1, 'SIGCONT');
  frozen = false;
  if (relay) {
    relay.kill('SIGKILL');
    await relay.exited;
  }
  relay = null;
});

afterAll(async () => {
  await kafka?.stop();
});

async function pending(type: string): Promise<number> {
  const r = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM outbox_with_status WHERE aggregate_type = $1 AND status <> 'published'`,
    [type],
  );
  return Number(r[0]!.n);
}

function count(pattern: RegExp): number {
  return relay!.logs().match(new RegExp(pattern.source, 'g'))?.length ?? 0;
}

/** The relay's last log lines, without kafkajs' own (its retries would fill them). */
function relayLogs(): string {
  return relay!
    .logs()
    .split('\n')
    .filter((l) => !l.includes('"component":"kafkajs"'))
    .join('\n')
    .slice(-4000);
}

function freeze(): void {
  kafka.cluster.signal(1, 'SIGSTOP');
  frozen = true;
}

function thaw(): void {
  kafka.cluster.signal(1, 'SIGCONT');
  frozen = false;
}

/**
 * 200 rows of `type` inserted, the broker frozen, the relay started (`args`); once the relay logs
 * `failed` (its first failed start of the sink), the broker thawed; then every row published,
 * and each event read back once (read_committed: kafkajs' default), each key's events in order.
 * `refreeze`: after the thaw, the broker frozen again once the relay logs it, and thawed once the
 * relay logs `failed` a second time (a start abandoned at a later step).
 * `fencedRestarts`: a relay that exits 75 (fenced) is started again, as its supervisor would, at
 * most that many times (exactly-once: see the test).
 */
async function frozenAcrossStart(
  type: string,
  args: string[],
  failed: RegExp,
  refreeze?: RegExp,
  fencedRestarts = 0,
): Promise<void> {
  const rows = Array.from({ length: EVENTS }, (_, i) => {
    const key = `k${i % KEYS}`;
    const seq = Math.floor(i / KEYS);
    return { aggregateType: type, aggregateId: key, eventType: 'E', payload: JSON.stringify({ key, seq }) };
  });
  await insertEvents(db.pool, rows);

  freeze();
  relay = spawnRelay(db, kafka, args);
  let fenced = 0;
  // The relay's first failed start of the sink, then the thaw.
  await relay.waitForLog(failed, 90_000);
  thaw();
  if (refreeze) {
    // A producer of the abandoned start may still get its producer id after the thaw and fence
    // the next start's (exit 75, the documented outcome: the supervisor starts the relay again);
    // the point to freeze at again is then reached by the restarted relay.
    for (;;) {
      const r = relay;
      const exited = await Promise.race([
        r.waitForLog(refreeze, 90_000).then(() => null),
        r.exited.then((code) => code),
      ]);
      if (exited === null) break;
      if (exited !== 75 || fenced >= fencedRestarts)
        throw new Error(`relay exited (${exited}) before logging ${refreeze}; logs:\n${relayLogs()}`);
      fenced++;
      relay = spawnRelay(db, kafka, args);
    }
    freeze();
    const before = count(failed);
    await waitFor(() => count(failed) > before, {
      timeoutMs: 90_000,
      intervalMs: 100,
      message: () => `a second failed start (${failed}); relay logs:\n${relayLogs()}`,
    });
    thaw();
  }
  const thawedAt = Date.now();

  let exitedWith: number | string | null = null;
  const watch = (r: RelayProcess) => void r.exited.then((code) => relay === r && (exitedWith = code));
  watch(relay);
  // Bounded generously (a busy machine), and by progress: 120 s without one more row published.
  await waitFor(
    async () => {
      if (exitedWith === 75 && fenced < fencedRestarts) {
        fenced++;
        exitedWith = null;
        relay = spawnRelay(db, kafka, args);
        watch(relay);
      }
      return (await pending(type)) === 0;
    },
    {
      timeoutMs: 120_000,
      intervalMs: 300,
      progress: () => pending(type),
      capMs: 300_000,
      message: async () =>
        `every row published (${await pending(type)} of ${EVENTS} not yet); relay logs:\n${relayLogs()}`,
    },
  );
  const recoveredMs = Date.now() - thawedAt;

  // Read back from Kafka: each event once, and each key's events in order. Read committed, a
  // Kafka transaction's records show once the coordinator has written its commit markers, which
  // it does after answering the commit: the relay can record an event published before a reader
  // sees it (a CI run read 0 of 200 at once). So the read waits until every event shows.
  let records = await kafka.readAll(`outbox.event.${type}`);
  const atOnce = records.length;
  const all = async () =>
    records.length >= EVENTS || (records = await kafka.readAll(`outbox.event.${type}`)).length >= EVENTS;
  await waitFor(all, {
    timeoutMs: 60_000,
    intervalMs: 200,
    progress: () => records.length,
    message: () =>
      `every event visible read_committed (${records.length} of ${EVENTS}); relay logs:\n${relayLogs()}`,
  });
  const byKey = new Map<string, number[]>();
  for (const r of records) {
    const { key, seq } = JSON.parse(r.value!.toString()) as { key: string; seq: number };
    expect(r.key!.toString()).toBe(key);
    let seqs = byKey.get(key);
    if (!seqs) byKey.set(key, (seqs = []));
    seqs.push(seq);
  }
  const expected = Array.from({ length: EVENTS / KEYS }, (_, s) => s);
  expect(records.length).toBe(EVENTS);
  for (let k = 0; k < KEYS; k++) expect(byKey.get(`k${k}`), `key k${k}`).toEqual(expected);
  console.log(
    `Kafka frozen across the start (${type}): ${EVENTS} events published ${recoveredMs} ms after the thaw, ${atOnce} read at once (${count(failed)} failed starts${fenced ? `; fenced by its own abandoned start and restarted ${fenced} time(s)` : ''})`,
  );
}

it('a broker frozen across the relay start, then thawed: the start recovers and every event is published once, in key order', async () => {
  // The first connect's ApiVersions request times out (5 s): the start fails, the producer is dropped.
  await frozenAcrossStart('Frozen', [], /"msg":"broker unavailable: cannot start the kafka sink/);
}, 420_000);

it('a start that outlasts --sink-start-timeout-ms is abandoned (its clients dropped) and started again after the back-off', async () => {
  // 2 s: the start is abandoned before the ApiVersions request times out.
  await frozenAcrossStart(
    'Hung',
    ['--sink-start-timeout-ms', '2000'],
    /"msg":"broker unavailable: the kafka sink did not start within 2000 ms \(--sink-start-timeout-ms\)/,
  );
}, 420_000);

it('--delivery exactly-once: the transactional start abandoned while frozen (the progress topic, then the producer id), then thawed: every event committed once, in key order', async () => {
  // First the progress topic's admin client hangs on the frozen broker; after the thaw, the broker
  // is frozen again right after the progress topic is created: the transactional producer's
  // connect, coordinator look-up or InitProducerId hangs (the first InitProducerId of a fresh
  // cluster also waits for __transaction_state to be created).
  // kafkajs cannot cancel a dropped producer: one whose InitProducerId was already sent may still
  // get its producer id after the thaw, after the next start's producer got its own, and fence
  // it; the relay then exits 75 and its supervisor starts it again (docs/operations.md). Making the
  // next start wait for the dropped one instead spends that start's --sink-start-timeout-ms, so
  // starts whose InitProducerId is slow could be abandoned one after another: a restart is the
  // lesser cost. What the test holds is the guarantee: every event committed once, in key order.
  await frozenAcrossStart(
    'Once',
    // At debug, every failed start is logged (not only an outage's first).
    [
      '--delivery',
      'exactly-once',
      '--kafka-progress-topic',
      'progress',
      '--sink-start-timeout-ms',
      '3000',
      '--log-level',
      'debug',
    ],
    /"err":"the kafka sink did not start within 3000 ms \(--sink-start-timeout-ms\)/,
    // Created by this start, or found: an abandoned start's admin may have created it after the thaw.
    /"msg":"(created the exactly-once progress topic|the exactly-once progress topic exists)"/,
    2,
  );
}, 420_000);

it('--kafka-topics create: the provisioning abandoned while frozen, then thawed: the topic is created and every event published once, in key order', async () => {
  // The topic (not created beforehand) is known from its override: provisioned at start, by an
  // admin client that hangs on the frozen broker.
  await frozenAcrossStart(
    'Made',
    [
      '--kafka-topics',
      'create',
      '--kafka-topic-override',
      'Made=partitions=3',
      '--sink-start-timeout-ms',
      '2000',
    ],
    /"msg":"broker unavailable: the kafka sink did not start within 2000 ms \(--sink-start-timeout-ms\)/,
  );
  const admin = await kafka.admin();
  const md = await admin.fetchTopicMetadata({ topics: ['outbox.event.Made'] });
  expect(md.topics[0]!.partitions).toHaveLength(3);
}, 420_000);
