/**
 * The live run's floors (issue 25): what PostgreSQL and Kafka alone give at the live rate, on the
 * same cluster and broker, in a pass of their own beside each relay pass:
 *   - PG floor: commit → receipt by a reader that does no work per message
 *     (bench/pg-floor-reader.ts, a process of its own on its own slot), the same paced writer and
 *     commit clock as the relay's run;
 *   - Kafka floor: send → ack of Kafka's own Java producer (bench/KafkaFloor.java), relay-shaped
 *     records at the same rate, acks=all, idempotent, at the same time as the PG floor.
 * Both run as one process each for every pass (Floors), warm after the first, as the relay is.
 * The floors' writer inserts into `bench_floor` (the outbox's shape, LIKE outbox), published by a
 * publication of its own: the relay, streaming its own slot throughout, relays none of it (its
 * walsender still reads the WAL and skips those transactions). The warm-up rule is the relay's:
 * at least LIVE_WARMUP_SECONDS, then on until the JVMs' JIT compilers (the broker's and the
 * floor producer's) are quiet, at most LIVE_WARMUP_MAX_SECONDS; both floors count from that moment.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createSlots, dropSlot, SINGLE } from './backlog.ts';
import { type KafkaFloorProcess, startKafkaFloor } from './kafka-floor.ts';
import { LIVE_WARMUP_MAX_SECONDS, LIVE_WARMUP_SECONDS, paceWriter } from './live.ts';
import { jitQuiet, sleep } from './proc.ts';
import { type Dist, distribution } from './stats.ts';

const READER = fileURLToPath(new URL('./pg-floor-reader.ts', import.meta.url));
export const FLOOR_PUBLICATION = 'floor_pub';
export const FLOOR_TOPIC = 'floor.kafka';
/** The live writer's INSERT, into the floors' table. */
export const FLOOR_INSERT = { name: 'single_floor', text: SINGLE.replace('INTO outbox', 'INTO bench_floor') };

/** The floors' table (the outbox's columns, defaults and indexes) and its publication. */
export async function createFloorTable(db: pg.Client): Promise<void> {
  await db.query('CREATE TABLE bench_floor (LIKE outbox INCLUDING ALL)');
  await db.query(`CREATE PUBLICATION ${FLOOR_PUBLICATION} FOR TABLE bench_floor WITH (publish = 'insert')`);
}

export type FloorResult = {
  pg: Dist;
  kafka: Dist;
  warmupSeconds: number;
  /** Commits the PG floor's reader had not received 2 s after the last. */
  pgMissing: number;
};

/**
 * The floors' two processes, started once for every floors pass (warm after the first, as the
 * relay is: a fresh JVM per pass compiled the Kafka client inside the pass's warm-up, and on a
 * saturated machine its starved compiler threads looked "quiet" to the warm-up rule): the PG
 * reader on slot `slot` and the Kafka producer.
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

  static async start(o: FloorsOptions): Promise<Floors> {
    await createSlots(o.db, [o.slot]);
    const reader = spawn(process.execPath, [READER, o.url, o.slot, FLOOR_PUBLICATION, String(capacity(o))], {
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

  /** One floors pass: the paced writer into bench_floor while the producer sends at the same rate. */
  async measure(pass: number): Promise<FloorResult> {
    const o = this.#o;
    const commitAt = new Float64Array(capacity(o)).fill(Number.NaN);
    this.#producer.begin();
    const w = await paceWriter(
      o.url,
      'Floor',
      o.rate,
      o.seconds,
      (seq, at) => {
        commitAt[seq] = at;
      },
      {
        minSeconds: LIVE_WARMUP_SECONDS,
        maxSeconds: LIVE_WARMUP_MAX_SECONDS,
        settled: jitQuiet([o.brokerPid ?? 0, this.#producer.pid].filter(Boolean)),
      },
      FLOOR_INSERT,
    );
    const endAt = performance.timeOrigin + performance.now();
    const sends = await this.#producer.end();
    await sleep(2000); // the reader's last receipts (a commit arrives within ms)
    const file = join(o.tmpDir, `floor-${pass}.f64`);
    this.#readerOut = '';
    this.#reader.stdin!.write(`dump ${file}\n`);
    for (let i = 0; !this.#readerOut.includes('dumped'); i++) {
      if (this.#reader.exitCode !== null || i > 1500) throw new Error(`PG floor reader: ${this.#readerErr}`);
      await sleep(20);
    }
    const received = new Float64Array(readFileSync(file).buffer.slice(0));
    rmSync(file, { force: true });
    const lat: number[] = [];
    let missing = 0;
    for (let i = w.warmed; i < w.written; i++)
      if (Number.isNaN(received[i]!)) missing++;
      else lat.push(received[i]! - commitAt[i]!);
    const kafka = sends.filter((s) => s.at >= w.warmedAt && s.at <= endAt).map((s) => s.ms);
    return {
      pg: distribution(lat),
      kafka: distribution(kafka),
      warmupSeconds: w.warmSeconds,
      pgMissing: missing,
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
