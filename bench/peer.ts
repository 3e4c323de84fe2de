/**
 * Debezium side by side: on the same backlogs (its slot was created with ours, before them), the
 * same PostgreSQL and the same broker. Debezium confirms its slot only at offset flush, so its
 * drain ends when the broker holds every record (topic high watermarks), not at a confirmed LSN.
 */
import type { Admin, Kafka } from 'kafkajs';
import type pg from 'pg';
import type { ThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { DEBEZIUM_TUNING, DEBEZIUM_VERSION, startDebezium } from './debezium.ts';
import { type LiveResult, measureLive } from './live.ts';
import { jitQuiet, sleep } from './proc.ts';
import { createLogAppendTopic } from './topics.ts';

export type PeerResult = {
  version: string;
  tuned: boolean;
  startupSeconds: number;
  bulkSeconds: number;
  txnSeconds: number;
  bulkCpuSeconds: number;
  txnCpuSeconds: number;
  peakRssMb: number;
  live: LiveResult | null;
};

async function stored(admin: Admin, topic: string): Promise<number> {
  return (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
}

async function until(what: string, ok: () => Promise<boolean>, isAlive: () => void): Promise<number> {
  const deadline = Date.now() + 900_000;
  while (!(await ok())) {
    isAlive();
    if (Date.now() > deadline) throw new Error(`Debezium: ${what} not reached in 15 minutes`);
    await sleep(50);
  }
  return performance.now();
}

export async function runDebezium(o: {
  dir: string;
  server: ThrowawayPostgres;
  db: pg.Client;
  kafka: Kafka;
  admin: Admin;
  bootstrap: string[];
  /** The broker's JVM (its JIT settles the live warm-up, with Kafka Connect's). */
  brokerPid: number | undefined;
  slot: string;
  rows: number;
  txnBacklog: number;
  liveRate: number;
  liveSeconds: number;
  pollIntervalMs: number | null;
  /** Throughput tuning (DEBEZIUM_TUNING); its live run uses a topic of its own. */
  tuned: boolean;
  cleanup: (() => Promise<unknown>)[];
}): Promise<PeerResult> {
  const baseBulk = await stored(o.admin, 'outbox.event.Bulk');
  const baseTxn = await stored(o.admin, 'outbox.event.Txn');
  const spawned = performance.now();
  const dbz = await startDebezium({
    dir: o.dir,
    bootstrap: o.bootstrap,
    pg: { host: '127.0.0.1', port: o.server.port, user: 'postgres', db: 'postgres' },
    slot: o.slot,
    publication: 'dbz_pub',
    pollIntervalMs: o.pollIntervalMs,
    ...(o.tuned ? { tuning: DEBEZIUM_TUNING } : {}),
    log: (line) => console.log(line),
  });
  o.cleanup.push(dbz.stop);
  try {
    const started = await dbz.streaming;
    const cpu0 = dbz.cpuSeconds();
    const alive = () => {
      if (Number.isNaN(dbz.cpuSeconds())) throw new Error(`Kafka Connect exited; see ${dbz.logFile}`);
    };
    const bulkDone = await until(
      'the bulk backlog',
      async () => (await stored(o.admin, 'outbox.event.Bulk')) - baseBulk >= o.rows,
      alive,
    );
    const cpu1 = dbz.cpuSeconds();
    const txnDone = await until(
      'the single-row backlog',
      async () => (await stored(o.admin, 'outbox.event.Txn')) - baseTxn >= o.txnBacklog,
      alive,
    );
    const cpu2 = dbz.cpuSeconds();
    let live: LiveResult | null = null;
    if (o.liveSeconds > 0) {
      const type = o.tuned ? 'DbzTunedLive' : 'DbzLive';
      await createLogAppendTopic(o.admin, `outbox.event.${type}`);
      live = await measureLive(
        o.kafka,
        o.server.url,
        `outbox.event.${type}`,
        type,
        o.liveRate,
        o.liveSeconds,
        jitQuiet([dbz.pid, ...(o.brokerPid ? [o.brokerPid] : [])]),
      );
    }
    return {
      version: DEBEZIUM_VERSION,
      tuned: o.tuned,
      startupSeconds: (started - spawned) / 1000,
      bulkSeconds: (bulkDone - started) / 1000,
      txnSeconds: (txnDone - bulkDone) / 1000,
      bulkCpuSeconds: cpu1 - cpu0,
      txnCpuSeconds: cpu2 - cpu1,
      peakRssMb: dbz.peakRssMb(),
      live,
    };
  } finally {
    await dbz.stop();
    // Its slot must not pin WAL for the rest of the run.
    for (let i = 0; i < 50; i++) {
      const r = await o.db
        .query(`SELECT pg_drop_replication_slot($1)`, [o.slot])
        .then(() => true)
        .catch(() => false);
      if (r) break;
      await sleep(200);
    }
  }
}
