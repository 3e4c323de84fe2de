/**
 * The live run's floors (issue 25): what PostgreSQL and Kafka alone give at the live rate, on the
 * same cluster and broker, in a pass of their own beside each relay pass:
 *   - PG floor: commit → receipt by a reader that does no work per message
 *     (bench/pg-floor-reader.ts, a process of its own on its own slot), the same paced writer and
 *     commit clock as the relay's run;
 *   - Kafka floor: send → ack of Kafka's own Java producer (bench/KafkaFloor.java), relay-shaped
 *     records at the same rate, acks=all, idempotent, at the same time as the PG floor.
 * The floors' writer inserts into `bench_floor` (the outbox's shape, LIKE outbox), published by a
 * publication of its own: the relay, streaming its own slot throughout, relays none of it (its
 * walsender still reads the WAL and skips those transactions). The warm-up rule is the relay's:
 * at least LIVE_WARMUP_SECONDS, then on until the JVMs' JIT compilers (the broker's and the
 * floor producer's) are quiet, at most LIVE_WARMUP_MAX_SECONDS; both floors count from that moment.
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createSlots, dropSlot, SINGLE } from './backlog.ts';
import { startKafkaFloor } from './kafka-floor.ts';
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
  /** Commits the PG floor's reader did not receive within 5 s of the last. */
  pgMissing: number;
};

export async function measureFloors(o: {
  db: pg.Client;
  url: string;
  bootstrap: string[];
  brokerPid: number | undefined;
  slot: string;
  rate: number;
  seconds: number;
  tmpDir: string;
}): Promise<FloorResult> {
  await createSlots(o.db, [o.slot]);
  const capacity = Math.round(o.rate * (LIVE_WARMUP_MAX_SECONDS + 3 + o.seconds));
  const out = join(o.tmpDir, `${o.slot}.f64`);
  const reader = spawn(process.execPath, [READER, o.url, o.slot, FLOOR_PUBLICATION, String(capacity), out], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let readerErr = '';
  reader.stderr!.on('data', (d: Buffer) => (readerErr += d.toString()));
  const readerGone = new Promise((r) => reader.on('exit', r));
  const producer = startKafkaFloor(o.bootstrap, FLOOR_TOPIC, o.rate);
  try {
    for (let i = 0; !(await slotActive(o.db, o.slot)); i++) {
      if (reader.exitCode !== null || i > 300) throw new Error(`PG floor reader did not start: ${readerErr}`);
      await sleep(50);
    }
    await producer.ready;
    const commitAt = new Float64Array(capacity).fill(Number.NaN);
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
        settled: jitQuiet([o.brokerPid ?? 0, producer.pid].filter(Boolean)),
      },
      FLOOR_INSERT,
    );
    const endAt = performance.timeOrigin + performance.now();
    const sends = await producer.stop();
    await sleep(5000); // the reader's last receipts (a commit arrives within ms; 5 s is generous)
    reader.kill('SIGTERM');
    await readerGone;
    const received = new Float64Array(readFileSync(out).buffer.slice(0));
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
  } finally {
    if (reader.exitCode === null) {
      reader.kill('SIGTERM');
      await readerGone;
    }
    await producer.stop().catch(() => []);
    rmSync(out, { force: true });
    await dropSlot(o.db, o.slot);
  }
}

async function slotActive(db: pg.Client, slot: string): Promise<boolean> {
  const r = await db.query<{ active: boolean }>(
    'SELECT active FROM pg_replication_slots WHERE slot_name = $1',
    [slot],
  );
  return r.rows[0]?.active === true;
}
