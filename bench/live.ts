/**
 * Live latency: a paced writer commits single-row transactions at a fixed rate; a separate
 * consumer reads the destination back. Commit time = the writer's clock right after the INSERT
 * (an autocommit transaction) returns; ack time = what the reader says (LiveReader): for Kafka
 * the record's LogAppendTime (the topic is created with message.timestamp.type=LogAppendTime, so
 * the broker stamps it when it appends); for the other sinks see bench/sinks.ts. Both clocks are
 * this machine's.
 */
import { writeFileSync } from 'node:fs';
import type { Admin, Kafka } from 'kafkajs';
import pg from 'pg';
import { payload, SINGLE, seqOf } from './backlog.ts';
import { now } from './clock.ts';
import { sleep } from './proc.ts';
import { type Dist, distribution } from './stats.ts';

/**
 * The warm-up before the measured writes: at least `minSeconds`, then on until `settled()` (asked
 * every second from the start) or `maxSeconds`.
 */
export type WarmUp = { minSeconds: number; maxSeconds: number; settled: () => boolean };

/** The warm-up rule, asked once a second from the start (`elapsed` s ago): true once it is over. */
export function warmedUp(warm: WarmUp, elapsed: number): boolean {
  const settled = warm.settled(); // asked every second: it may judge the last few
  return elapsed >= warm.minSeconds && (settled || elapsed >= warm.maxSeconds);
}

/**
 * Commits `rate` × `seconds` single-row transactions of aggregate type `type`, paced; with `warm`,
 * after a warm-up at the same rate (sequence numbers from 0 on; `warmed` is the first measured one).
 */
export async function paceWriter(
  url: string,
  type: string,
  rate: number,
  seconds: number,
  onCommit: (seq: number, at: number) => void = () => {},
  warm?: WarmUp,
  insert: { name: string; text: string } = { name: 'single', text: SINGLE },
): Promise<{ written: number; seconds: number; warmed: number; warmSeconds: number; warmedAt: number }> {
  const measured = Math.round(rate * seconds);
  let warmed = warm ? -1 : 0;
  let warmSeconds = 0;
  let warmedAt = now();
  let total = warm ? Math.round(rate * warm.minSeconds) + measured : measured;
  const conns = Math.max(4, Math.ceil(rate / 1000));
  const clients = await Promise.all(
    Array.from({ length: conns }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  let next = 0;
  const start = performance.now() + 20;
  // While warming, the writer is kept two seconds ahead of the end; once settled, the measured
  // writes start at the next sequence number.
  let check: NodeJS.Timeout | undefined;
  if (warm)
    check = setInterval(() => {
      const elapsed = (performance.now() - start) / 1000;
      if (warmedUp(warm, elapsed)) {
        warmed = next;
        warmSeconds = elapsed;
        warmedAt = now();
        total = warmed + measured;
        clearInterval(check);
      } else total = Math.max(total, next + Math.round(rate * 2) + measured);
    }, 1000);
  try {
    await Promise.all(
      clients.map(async (c) => {
        for (let i = next++; i < total; i = next++) {
          const due = start + (i * 1000) / rate;
          const wait = due - performance.now();
          if (wait > 1) await sleep(wait);
          const r = await c.query({
            ...insert,
            values: [type, `agg-${i % 1000}`, payload(i)],
          });
          if (r.rowCount !== 1) throw new Error('live insert inserted nothing');
          onCommit(i, now());
        }
      }),
    );
  } finally {
    clearInterval(check);
  }
  const took = (performance.now() - start) / 1000;
  await Promise.all(clients.map((c) => c.end()));
  return { written: total, seconds: took, warmed: Math.max(0, warmed), warmSeconds, warmedAt };
}

/**
 * A live pass's events by sequence number: the commit time and the ack time (ms since the epoch,
 * NaN = none); `warmed` … `written` − 1 are the measured ones.
 */
export type LiveEvents = { commitAt: Float64Array; ackAt: Float64Array; warmed: number; written: number };

export type LiveResult = {
  dist: Dist;
  events: LiveEvents;
  /** The warm-up's events (not in dist): the first ones to a fresh topic and a fresh producer. */
  warmup: Dist;
  /** How long the warm-up ran (LIVE_WARMUP_SECONDS … LIVE_WARMUP_MAX_SECONDS). */
  warmupSeconds: number;
  achievedRate: number;
  missing: number;
  duplicates: number;
};

/** The shortest warm-up (seconds of the live writer before the measured ones, same rate, not counted). */
export const LIVE_WARMUP_SECONDS = 5;
/** The longest warm-up: past it the measured writes start whether or not the JITs settled. */
export const LIVE_WARMUP_MAX_SECONDS = 45;

/**
 * Where a live run reads its events back: each record's value (the writer's payload, its seq in
 * front) and the time the broker acknowledged it, as well as the reader can tell (ms since the
 * epoch). start() resolves once the reader is subscribed.
 */
export interface LiveReader {
  start(onRecord: (value: Buffer | null, ackAtMs: number) => void): Promise<void>;
  /**
   * The writer is done: a reader whose ack time is stamped by the broker (Kafka's LogAppendTime)
   * reads only now, so that its work does not share the machine with the pass it measures.
   */
  afterWrites?(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Kafka: a consumer group of its own from the beginning (read_committed, kafkajs' default); ack
 * time = the record's LogAppendTime, or with 'receipt' the time the consumer got it (a
 * transactional record is appended before its commit: bench/eos.ts).
 *
 * With LogAppendTime the consumer reads once the writer is done (afterWrites): the broker stamped
 * each record at its append, so reading later changes no figure, and the pass runs without the
 * consumer's fetches and decoding on its cores (docs/benchmarks.md, "Stop 47": on two cores the
 * pass was ~95 % busy, and what waited for a CPU was PostgreSQL's walsender). With 'receipt' it
 * reads along, as it must.
 */
export function kafkaLiveReader(
  kafka: Kafka,
  topic: string,
  ack: 'log-append' | 'receipt' = 'log-append',
): LiveReader {
  const consumer = kafka.consumer({ groupId: `bench-live-${topic}-${process.pid}`, maxWaitTimeInMs: 20 });
  let onRecord: (value: Buffer | null, ackAtMs: number) => void = () => {};
  const read = async () => {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        const at = now();
        for (const m of batch.messages) onRecord(m.value, ack === 'receipt' ? at : Number(m.timestamp));
      },
    });
    await waitAssigned(consumer);
  };
  return {
    async start(f) {
      onRecord = f;
      await consumer.connect();
      if (ack === 'receipt') await read();
    },
    ...(ack === 'log-append' ? { afterWrites: read } : {}),
    stop: () => consumer.disconnect().catch(() => {}),
  };
}

/** measureLiveWith a Kafka reader of `topic` (LogAppendTime). */
export function measureLive(
  kafka: Kafka,
  url: string,
  topic: string,
  type: string,
  rate: number,
  seconds: number,
  settled: () => boolean = () => true,
): Promise<LiveResult> {
  return measureLiveWith(kafkaLiveReader(kafka, topic), url, type, rate, seconds, settled);
}

/**
 * One live run against whatever relays `type`'s rows to what `reader` reads (already running and
 * streaming): a warm-up of writing first, whose events are reported apart — the first send to a
 * topic fetches its metadata and runs the publish path for the first time (lazily compiled code,
 * in the relay and the broker) — then `seconds` measured. The warm-up lasts LIVE_WARMUP_SECONDS,
 * and on until `settled` says the JVMs' JIT compilers are done with this workload (the
 * broker compiles the small Produce requests and the consumer's fetches of a live stream for
 * 20 – 30 s of a core on two cores: measured through, that is the broker's start-up, not its
 * steady state), up to LIVE_WARMUP_MAX_SECONDS.
 */
export async function measureLiveWith(
  reader: LiveReader,
  url: string,
  type: string,
  rate: number,
  seconds: number,
  settled: () => boolean = () => true,
): Promise<LiveResult> {
  const capacity = Math.round(rate * (LIVE_WARMUP_MAX_SECONDS + 3 + seconds));
  const commitAt = new Float64Array(capacity).fill(Number.NaN);
  const appendAt = new Float64Array(capacity).fill(Number.NaN);
  let received = 0;
  let duplicates = 0;
  await reader.start((value, ackAt) => {
    const seq = seqOf(value);
    if (seq < 0 || seq >= capacity) return;
    if (!Number.isNaN(appendAt[seq]!)) {
      duplicates++;
      return;
    }
    appendAt[seq] = ackAt;
    received++;
  });
  try {
    const w = await paceWriter(
      url,
      type,
      rate,
      seconds,
      (seq, at) => {
        commitAt[seq] = at;
      },
      { minSeconds: LIVE_WARMUP_SECONDS, maxSeconds: LIVE_WARMUP_MAX_SECONDS, settled },
    );
    const total = w.written;
    const skip = w.warmed;
    await reader.afterWrites?.();
    const deadline = Date.now() + 60_000;
    while (received < total && Date.now() < deadline) await sleep(50);
    const lat: number[] = [];
    const warm: number[] = [];
    for (let i = 0; i < total; i++)
      if (!Number.isNaN(appendAt[i]!)) (i < skip ? warm : lat).push(appendAt[i]! - commitAt[i]!);
    // BENCH_LIVE_DUMP=file: every event's commit and append time (ms since the epoch), to line a
    // latency tail up with the GC logs of the relay (--trace-gc) and the broker (gc.log).
    if (process.env.BENCH_LIVE_DUMP) {
      const lines = ['seq,commit_ms,append_ms,latency_ms'];
      for (let i = 0; i < total; i++)
        lines.push(
          `${i},${commitAt[i]!.toFixed(3)},${appendAt[i]},${(appendAt[i]! - commitAt[i]!).toFixed(3)}`,
        );
      writeFileSync(process.env.BENCH_LIVE_DUMP, `${lines.join('\n')}\n`);
    }
    return {
      dist: distribution(lat),
      events: { commitAt, ackAt: appendAt, warmed: skip, written: total },
      warmup: distribution(warm),
      warmupSeconds: w.warmSeconds,
      achievedRate: w.written / w.seconds,
      missing: total - received,
      duplicates,
    };
  } finally {
    await reader.stop();
  }
}

/** Waits for the consumer group's first assignment (kafkajs has no promise for it). */
function waitAssigned(consumer: ReturnType<Kafka['consumer']>): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 10_000);
    consumer.on(consumer.events.GROUP_JOIN, () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export type RampStep = {
  rate: number;
  achieved: number;
  maxLag: number;
  lagAfter1s: number;
  bounded: boolean;
};

/**
 * The highest steady rate where lag stays bounded: each step writes at `rate` for `seconds` while
 * the lag is sampled every 250 ms (here: commits − records the topic's high watermarks hold).
 * A step is bounded when the writer kept up (≥ 90 % of the rate), the lag of the step's second
 * half is not above its first half's plus 0.25 s of events, and 1 s after the writer stops every
 * event is through. With `alongside` (pg_recvlogical under the same writer: bench/recvlogical.ts),
 * each rate is also run by it, right after the relay's step, until its own first unbounded step.
 */
export async function ramp(
  admin: Admin,
  url: string,
  topic: string,
  type: string,
  rates: number[],
  seconds: number,
  alongside?: (rate: number) => Promise<RampStep>,
): Promise<{ relay: RampStep[]; alongside: RampStep[] }> {
  const relay: RampStep[] = [];
  const other: RampStep[] = [];
  for (const rate of rates) {
    const relayOn = relay.at(-1)?.bounded !== false;
    const otherOn = alongside !== undefined && other.at(-1)?.bounded !== false;
    if (!relayOn && !otherOn) break;
    if (relayOn) relay.push(await relayStep(admin, url, topic, type, rate, seconds));
    if (otherOn) other.push(await alongside(rate));
  }
  return { relay, alongside: other };
}

async function relayStep(
  admin: Admin,
  url: string,
  topic: string,
  type: string,
  rate: number,
  seconds: number,
): Promise<RampStep> {
  const stored = async () => (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
  const base = await stored();
  let committed = 0;
  const lagNow = async () => committed - ((await stored()) - base);
  const step = await pacedStep(rate, seconds, lagNow, () =>
    paceWriter(url, type, rate, seconds, () => committed++),
  );
  // Let a lagging step finish before the next one.
  const deadline = Date.now() + 30_000;
  while ((await lagNow()) > 0 && Date.now() < deadline) await sleep(200);
  return step;
}

/**
 * One ramp step: `write` runs the paced writer while `lag` (events not yet through) is sampled
 * every 250 ms; the bounded rule above.
 */
export async function pacedStep(
  rate: number,
  seconds: number,
  lag: () => Promise<number>,
  write: () => Promise<{ written: number; seconds: number }>,
): Promise<RampStep> {
  const lags: { t: number; lag: number }[] = [];
  let writing = true;
  const t0 = performance.now();
  const sampler = (async () => {
    while (writing) {
      await sleep(250);
      lags.push({ t: performance.now() - t0, lag: await lag() });
    }
  })();
  const w = await write();
  writing = false;
  await sampler;
  await sleep(1000);
  const lagAfter1s = Math.max(0, await lag());
  return boundedStep(rate, seconds, w.written / w.seconds, lags, lagAfter1s);
}

/** The bounded rule, pure: `lags` sampled through the step (t in ms from its start). */
export function boundedStep(
  rate: number,
  seconds: number,
  achieved: number,
  lags: { t: number; lag: number }[],
  lagAfter1s: number,
): RampStep {
  const half = (seconds * 1000) / 2;
  const first = Math.max(0, ...lags.filter((l) => l.t <= half).map((l) => l.lag));
  const second = Math.max(0, ...lags.filter((l) => l.t > half).map((l) => l.lag));
  const bounded = achieved >= rate * 0.9 && second <= first + rate * 0.25 && lagAfter1s <= 0;
  return { rate, achieved, maxLag: Math.round(Math.max(first, second)), lagAfter1s, bounded };
}
