/**
 * The live run's floors (issue 25): what PostgreSQL and Kafka alone give at the live rate, on the
 * same cluster and broker:
 *   - PG floor: commit → receipt by a reader that does no work per message
 *     (bench/pg-floor-reader.ts, a process of its own on a slot of its own), **in the relay's own
 *     pass, on the relay's own commits**: the reader's slot covers the relay's publication, so it
 *     receives the very transactions the relay relays, timed against the same commit clock. Per
 *     event, the reader's receipt and the relay's broker append share the writer, the commit and
 *     the machine's moment; `pgLate` counts the events the reader got *after* the broker had
 *     appended the relay's record (a floor above the relay: the count says whether to trust it).
 *   - Kafka floor: send → ack of Kafka's own Java producer (bench/KafkaFloor.java), relay-shaped
 *     records at the same rate, acks=all, idempotent, in a pass of its own (nothing else sending).
 * Why the PG floor moved into the relay's pass: measured in a floors pass of its own (its own
 * writer into a table of its own, with the Java producer sending at the same time, while the
 * relay's walsender also read that WAL), the "trivial reader"'s p99 came out 2 – 9 × the relay's
 * whole path on the loaded machine (notes/bench-0553.log: 3.5 s against 0.4 s). Whatever starved
 * that pass — the floor producer and the broker's 2,000 Produce requests/s beside the writer, or
 * a load spike in one pass and not the other — the two figures were of different moments, and the
 * ratio measured the difference. On the same commits the writer, its clock and the load are one.
 * Both floors are one warm process each for every pass, as the relay is; the Kafka pass's warm-up
 * rule is the relay's (at least LIVE_WARMUP_SECONDS, then until the JVMs' JIT compilers — the
 * broker's and the floor producer's — are quiet, at most LIVE_WARMUP_MAX_SECONDS).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createSlots, dropSlot, SINGLE } from './backlog.ts';
import { now } from './clock.ts';
import { type KafkaFloorProcess, startKafkaFloor } from './kafka-floor.ts';
import { LIVE_WARMUP_MAX_SECONDS, LIVE_WARMUP_SECONDS, type LiveEvents, warmedUp } from './live.ts';
import { cpuSeconds, jitCpuSeconds, jitQuiet, sleep } from './proc.ts';
import { type Dist, distribution } from './stats.ts';

const READER = fileURLToPath(new URL('./pg-floor-reader.ts', import.meta.url));
/** The relay's publication (its default): the PG floor's reader streams the relay's commits. */
const RELAY_PUBLICATION = 'outbox_pub';
/** The ramp's pg_recvlogical streams a table and publication of its own (bench/recvlogical.ts). */
export const FLOOR_PUBLICATION = 'floor_pub';
export const FLOOR_TOPIC = 'floor.kafka';
/** The paced writer's INSERT, into the ramp's floor table. */
export const FLOOR_INSERT = { name: 'single_floor', text: SINGLE.replace('INTO outbox', 'INTO bench_floor') };

/** The ramp's floor table (the outbox's columns, defaults and indexes) and its publication. */
export async function createFloorTable(db: pg.Client): Promise<void> {
  await db.query('CREATE TABLE bench_floor (LIKE outbox INCLUDING ALL)');
  await db.query(`CREATE PUBLICATION ${FLOOR_PUBLICATION} FOR TABLE bench_floor WITH (publish = 'insert')`);
}

/** The PG floor of a relay pass: commit → the reader's receipt, of the pass's measured events. */
export type PgFloor = {
  pg: Dist;
  /** Measured commits the reader had not received when the relay's pass ended. */
  pgMissing: number;
  /** Measured events the reader received after the broker appended the relay's record. */
  pgLate: number;
  /** The reader's process CPU (user + sys, seconds) through the relay's pass, warm-up included. */
  pgCpuSeconds: number;
  /** The pass's events it received, warm-up included: the divisor of its CPU per event. */
  pgEvents: number;
  /**
   * Per measured event the reader received, the broker's append of the relay's record minus the
   * reader's receipt: what the relay and the broker add to what PostgreSQL delivers at that
   * moment (negative for the `pgLate` ones). Its tail beside the Kafka floor's says whether the
   * relay's tail is its own or the walsender's.
   */
  afterPg: Dist;
};

/**
 * The Kafka floor's pass; `cpuSeconds`: the producer's process CPU (user + sys) from the pass's
 * start to its "stop" (its report's printing left out), over `records` acked, warm-up included;
 * `jitCpuSeconds`: the part of it its JIT compiler threads spent.
 */
export type KafkaFloor = {
  kafka: Dist;
  warmupSeconds: number;
  cpuSeconds: number;
  jitCpuSeconds: number;
  records: number;
};

export type FloorResult = PgFloor & KafkaFloor;

/**
 * The floors' two processes, started once for every pass (warm after the first, as the relay is:
 * a fresh JVM per pass compiled the Kafka client inside the pass's warm-up, and on a saturated
 * machine its starved compiler threads looked "quiet" to the warm-up rule): the PG reader on slot
 * `slot` over the relay's publication, and the Kafka producer.
 */
export class Floors {
  readonly #o: FloorsOptions;
  readonly #reader: ChildProcess;
  readonly #producer: KafkaFloorProcess;
  #readerOut = '';
  #readerErr = '';
  readonly #readerGone: Promise<unknown>;

  private constructor(o: FloorsOptions, reader: ChildProcess, producer: KafkaFloorProcess) {
    this.#o = o;
    this.#reader = reader;
    this.#producer = producer;
    reader.stdout!.on('data', (d: Buffer) => (this.#readerOut += d.toString()));
    reader.stderr!.on('data', (d: Buffer) => (this.#readerErr += d.toString()));
    this.#readerGone = new Promise((r) => reader.on('exit', r));
  }

  /** Creates the reader's slot and starts both processes: before the first relay pass's writes. */
  static async start(o: FloorsOptions): Promise<Floors> {
    await createSlots(o.db, [o.slot]);
    const reader = spawn(process.execPath, [READER, o.url, o.slot, RELAY_PUBLICATION, String(capacity(o))], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const floors = new Floors(o, reader, startKafkaFloor(o.bootstrap, FLOOR_TOPIC, o.rate));
    for (let i = 0; !(await slotActive(o.db, o.slot)); i++) {
      if (reader.exitCode !== null || i > 300) {
        await floors.stop();
        throw new Error(`PG floor reader did not start: ${floors.#readerErr}`);
      }
      await sleep(50);
    }
    await floors.#producer.ready;
    return floors;
  }

  /** The PG reader's process CPU so far (user + sys, seconds): read at a relay pass's start. */
  readerCpu(): number {
    return cpuSeconds(this.#reader.pid!);
  }

  /**
   * The PG floor of the relay pass that just ended (`events`: its commits and the broker's appends
   * of the relay's records): the reader's receipts of the same commits, which it then forgets;
   * `cpuAtStart`: readerCpu() at the pass's start.
   */
  async pgFloor(pass: number, events: LiveEvents, cpuAtStart: number): Promise<PgFloor> {
    // The relay's records are all through (the pass waited for them): a reader still short of
    // some a second later is slower than the relay, and they count as missing.
    await sleep(1000);
    const pgCpuSeconds = this.readerCpu() - cpuAtStart; // before the dump's own work
    const file = join(this.#o.tmpDir, `floor-${pass}.f64`);
    this.#readerOut = '';
    this.#reader.stdin!.write(`dump ${file}\n`);
    for (let i = 0; !this.#readerOut.includes('dumped'); i++) {
      if (this.#reader.exitCode !== null || i > 1500) throw new Error(`PG floor reader: ${this.#readerErr}`);
      await sleep(20);
    }
    const received = new Float64Array(readFileSync(file).buffer.slice(0));
    rmSync(file, { force: true });
    // BENCH_LIVE_DUMP=file: beside the relay's dump (bench/live.ts), per pass, each event's commit,
    // the reader's receipt and the broker's append of the relay's record (ms since the epoch).
    if (process.env.BENCH_LIVE_DUMP) {
      const lines = ['seq,commit_ms,pg_receipt_ms,append_ms'];
      for (let i = 0; i < events.written; i++)
        lines.push(
          `${i},${events.commitAt[i]!.toFixed(3)},${(received[i] ?? Number.NaN).toFixed(3)},${events.ackAt[i]}`,
        );
      writeFileSync(`${process.env.BENCH_LIVE_DUMP}.pg-floor-run${pass + 1}.csv`, `${lines.join('\n')}\n`);
    }
    return { ...pgFloorOf(received, events), pgCpuSeconds };
  }

  /**
   * The Kafka floor's pass: the producer sends through a warm-up, then `seconds` measured, at
   * `rate` — the rate the relay's pass achieved (its writer's), not the one asked: on a loaded
   * machine the writer may reach a tenth of it, and a floor sending ten times the relay's load
   * measured the broker's queueing, not a floor.
   */
  async kafkaPass(rate?: number): Promise<KafkaFloor> {
    const o = this.#o;
    const settled = jitQuiet([o.brokerPid ?? 0, this.#producer.pid].filter(Boolean));
    const cpu0 = cpuSeconds(this.#producer.pid);
    const jit0 = jitCpuSeconds(this.#producer.pid);
    this.#producer.begin(rate);
    const start = performance.now();
    let warmupSeconds = 0;
    // The relay pass's rule (paceWriter), asked every second from the start.
    while (
      !warmedUp(
        { minSeconds: LIVE_WARMUP_SECONDS, maxSeconds: LIVE_WARMUP_MAX_SECONDS, settled },
        warmupSeconds,
      )
    ) {
      await sleep(1000);
      warmupSeconds = (performance.now() - start) / 1000;
    }
    const warmedAt = now();
    await sleep(o.seconds * 1000);
    const endAt = now();
    const cpu = cpuSeconds(this.#producer.pid) - cpu0;
    const jit = jitCpuSeconds(this.#producer.pid) - jit0;
    const sends = await this.#producer.end();
    const kafka = sends.filter((s) => s.at >= warmedAt && s.at <= endAt).map((s) => s.ms);
    return {
      kafka: distribution(kafka),
      warmupSeconds,
      cpuSeconds: cpu,
      jitCpuSeconds: jit,
      records: sends.length,
    };
  }

  #stopped: Promise<void> | null = null;

  /** Ends both processes and drops the slot (once; later calls wait for the first). */
  stop(): Promise<void> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<void> {
    this.#reader.stdin!.end();
    await Promise.race([this.#readerGone, sleep(5000)]);
    if (this.#reader.exitCode === null) this.#reader.kill('SIGTERM');
    await this.#producer.stop().catch(() => {});
    await dropSlot(this.#o.db, this.#o.slot);
  }
}

/**
 * The PG floor, pure: the reader's receipt times by sequence number (NaN = none) against the
 * pass's events; `pgEvents` counts its receipts of warm-up and measured events alike.
 */
export function pgFloorOf(received: Float64Array, events: LiveEvents): Omit<PgFloor, 'pgCpuSeconds'> {
  const lat: number[] = [];
  const after: number[] = [];
  let missing = 0;
  let late = 0;
  let pgEvents = 0;
  for (let i = 0; i < events.written; i++) if (!Number.isNaN(received[i] ?? Number.NaN)) pgEvents++;
  for (let i = events.warmed; i < events.written; i++) {
    const at = received[i] ?? Number.NaN;
    if (Number.isNaN(at)) missing++;
    else {
      lat.push(at - events.commitAt[i]!);
      const d = events.ackAt[i]! - at; // NaN: the relay's record was not read back
      if (!Number.isNaN(d)) after.push(d);
      if (d < 0) late++;
    }
  }
  return { pg: distribution(lat), pgMissing: missing, pgLate: late, pgEvents, afterPg: distribution(after) };
}

type FloorsOptions = {
  db: pg.Client;
  url: string;
  bootstrap: string[];
  brokerPid: number | undefined;
  slot: string;
  rate: number;
  seconds: number;
  tmpDir: string;
};

const capacity = (o: FloorsOptions) => Math.round(o.rate * (LIVE_WARMUP_MAX_SECONDS + 3 + o.seconds));

async function slotActive(db: pg.Client, slot: string): Promise<boolean> {
  const r = await db.query<{ active: boolean }>(
    'SELECT active FROM pg_replication_slots WHERE slot_name = $1',
    [slot],
  );
  return r.rows[0]?.active === true;
}
