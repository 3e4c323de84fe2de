/**
 * Issue 35: a primary fails over to an asynchronous standby that is seconds behind, on real
 * PostgreSQL builds (16 and 17 from the npm registry: src/dev/postgres-builds.ts) and the suite's
 * real Kafka. The relay and the application reach the primary through an address that follows it
 * (test/support/pg-proxy.ts). Mid-stream the primary's walsender for the standby is frozen
 * (SIGSTOP) while the application goes on writing: those transactions exist only on the primary.
 * Right after the broker acknowledged a batch of them, the primary is killed -9 and the standby
 * promoted; the new primary's sequence hands out the ids of those rows again, to new rows.
 *
 * The outcome write of that batch fails with the old primary and is retried; the retry's new
 * connection waits at the address until it reaches the new primary (the replication connection
 * has not noticed the loss yet). Before issue 35 the retry marked the NEW rows with those ids
 * published — rows never sent: lost while recorded published (exactly-once: Kafka's progress
 * record named the same ids). Now every outcome statement is bound to the timeline it was
 * observed on: the retry matches nothing there, the outcomes are dropped, and the table recovery
 * of the lost slot publishes every row the new primary has not recorded.
 *
 * Read back by an independent consumer (read_committed) and joined on event id against the NEW
 * primary's outbox: lost must be 0; phantoms (events of transactions the new primary never got —
 * inherent to asynchronous replication without PostgreSQL 17's synchronized_standby_slots) and
 * duplicates are counted and reported.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import {
  startStandby,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../../src/dev/throwaway-postgres.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { readPrimaryFailover } from '../../src/replication/failover.ts';
import { judgeFailover } from '../../src/replication/failover-readiness.ts';
import type { OutboundMessage } from '../../src/route/event.ts';
import { createSink } from '../../src/sinks/create.ts';
import type { PublishOptions, Sink } from '../../src/sinks/sink.ts';
import { migrate } from '../../src/store/migrate.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { memorySink } from '../support/memory-sink.ts';
import { PgProxy } from '../support/pg-proxy.ts';
import { waitFor } from '../support/postgres.ts';
import { queryOnce } from '../support/query-once.ts';

const KEYS = 8;
const ROWS_PER_TXN = 20;

let kafka: KafkaHarness;
beforeAll(async () => {
  kafka = await startKafka();
});
afterAll(async () => {
  await kafka?.stop();
});

/** The application: 20-row transactions of keyed `{ s }` events, one after another, until stopped. */
class Writer {
  readonly type: string;
  s = 0;
  committed = 0;
  #stop = false;
  #running: Promise<void> | null = null;
  constructor(type: string) {
    this.type = type;
  }
  start(url: string): void {
    this.#stop = false;
    this.#running = (async () => {
      const c = new pg.Client(url);
      c.on('error', () => {});
      await c.connect();
      try {
        while (!this.#stop) {
          const values: string[] = [];
          const params: unknown[] = [];
          for (let i = 0; i < ROWS_PER_TXN; i++) {
            const s = this.s + i;
            params.push(`k${s % KEYS}`, JSON.stringify({ s }));
            values.push(
              `('${this.type}', $${params.length - 1}, 'E', convert_to($${params.length}, 'UTF8'))`,
            );
          }
          await c.query(
            `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ${values.join(', ')}`,
            params,
          );
          this.s += ROWS_PER_TXN;
          this.committed++;
          await new Promise((r) => setTimeout(r, 40));
        }
      } catch {
        // the primary is gone: the application stops writing there
      } finally {
        await c.end().catch(() => {});
      }
    })();
  }
  async stop(): Promise<void> {
    this.#stop = true;
    await this.#running;
  }
}

/** The Kafka sink, with a hook run after the broker acknowledged a batch and before the relay hears of it. */
function hooked(inner: Sink, after: (batch: readonly OutboundMessage[]) => Promise<void>): Sink {
  return {
    name: inner.name,
    start: () => inner.start(),
    stop: () => inner.stop(),
    classify: (e) => inner.classify(e),
    ...(inner.destinationOf ? { destinationOf: (m: OutboundMessage) => inner.destinationOf!(m) } : {}),
    ...(inner.exactlyOnce ? { exactlyOnce: inner.exactlyOnce } : {}),
    publish: async (batch: readonly OutboundMessage[], opts?: PublishOptions) => {
      await inner.publish(batch, opts);
      await after(batch);
    },
  };
}

const query = queryOnce;

describe.each([
  ['16', 'at-least-once'],
  ['17', 'exactly-once'],
])('promotion of a standby 2 s behind (PostgreSQL %s, %s)', (version, delivery) => {
  const TYPE = `Fo${version}`;
  let primary: ThrowawayPostgres;
  let standby: ThrowawayPostgres;
  let proxy: PgProxy;
  let relay: Relay | null = null;
  const writer = new Writer(TYPE);

  afterAll(async () => {
    await writer.stop();
    await relay?.stop();
    await proxy?.stop();
    await standby?.stop();
    await primary?.stop();
  });

  it('records no outcome of the old primary on the new one: 0 lost, phantoms counted', async () => {
    primary = await startThrowawayPostgres({ version });
    standby = await startStandby(primary);
    const slot = `failover_${version}`;
    await migrateOn(primary.url, slot);
    await kafka.createTopic(`outbox.event.${TYPE}`, 2);
    proxy = await PgProxy.start(primary.port);
    const config = loadConfig(
      'run',
      [
        ...['--database-url', proxy.url(), '--slot', slot, ...kafka.relayArgs()],
        ...['--delivery', delivery, '--kafka-progress-topic', kafka.topic(`progress-${version}`)],
        ...['--retry-initial-ms', '50', '--retry-max-ms', '500', '--kafka-request-timeout-ms', '3000'],
        ...['--slot-check-interval-ms', '200', '--sweep-interval-ms', '200', '--http-port', '0'],
      ],
      {},
    ).config;

    // The crash: armed once the lag window is large enough; fires after the broker acknowledged
    // a batch of rows the standby does not have (beyond what its sequence state may cover).
    let trigger: { after: bigint; fired: (ids: bigint[]) => void } | null = null;
    const sink = hooked(await createSink(config, silentLogger()), async (batch) => {
      const t = trigger;
      if (!t || !batch.some((m) => BigInt(m.event.id) > t.after)) return;
      trigger = null;
      proxy.lose({ silentReplication: true });
      primary.crash();
      t.fired(batch.map((m) => BigInt(m.event.id)));
    });
    relay = new Relay({ config, sink, log: silentLogger() });
    await relay.start();

    writer.start(primary.url);
    await waitFor(async () => Number(await relayed(primary.url)) >= 200, {
      timeoutMs: 60_000,
      message: 'the relay streaming before the fault',
    });
    // The standby in step, then 2 s behind: its walsender frozen while the application writes on.
    const [walsender] = await query<{ pid: number }>(
      primary.url,
      "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'",
    );
    expect(walsender).toBeDefined();
    // What `check`, `status` and the relay's log name with a standby streaming: on 16 nothing can
    // hold decoding back for it; on 17 synchronized_standby_slots could, but is not set here.
    const readPool = new pg.Pool({ connectionString: primary.url, max: 1 });
    try {
      const report = judgeFailover(slot, await readPrimaryFailover(readPool, slot), null);
      expect(report.findings.map((f) => f.id)).toContain('phantom_risk');
      expect(report.findings.find((f) => f.id === 'phantom_risk')!.text).toMatch(
        version === '16'
          ? /PostgreSQL 16 cannot hold logical decoding back/
          : /synchronized_standby_slots is not set/,
      );
    } finally {
      await readPool.end();
    }
    const frozenAt = (
      await query<{ max: string }>(primary.url, 'SELECT max(id)::text AS max FROM outbox')
    )[0]!.max;
    process.kill(walsender!.pid, 'SIGSTOP');
    const lagFrom = writer.committed;
    await waitFor(() => writer.committed - lagFrom >= 25, {
      timeoutMs: 60_000,
      message: 'writes while the standby lags',
    });
    const armed = new Promise<bigint[]>((fired) => {
      trigger = { after: BigInt(frozenAt!) + 64n, fired };
    });
    const crashedBatch = await armed;
    await writer.stop();

    await standby.promote();
    // The application goes on against the new primary; its sequence reuses the lost rows' ids.
    let crashedMax = crashedBatch[0]!;
    for (const id of crashedBatch) if (id > crashedMax) crashedMax = id;
    writer.start(standby.url);
    await waitFor(
      async () => {
        const [r] = await query<{ max: string | null }>(
          standby.url,
          'SELECT max(id)::text AS max FROM outbox',
        );
        return r?.max !== null && BigInt(r!.max) > crashedMax;
      },
      { timeoutMs: 60_000, message: 'the new primary reusing the ids of the crashed batch' },
    );
    const reused = await query<{ n: string }>(
      standby.url,
      'SELECT count(*)::text AS n FROM outbox WHERE id = ANY($1::bigint[])',
      [crashedBatch.map(String)],
    );
    console.log(
      `PG ${version} ${delivery}: crashed batch of ${crashedBatch.length} events (ids ${crashedBatch[0]}…${crashedMax}), ${reused[0]!.n} of their ids reused by the new primary`,
    );
    expect(Number(reused[0]!.n)).toBeGreaterThan(0);
    await writer.stop();

    // The address follows the primary: the outcome write waiting there goes to the new one.
    proxy.forwardTo(standby.port);
    const slotUrl = standby.url;
    await waitFor(
      async () => {
        if ((await timelineChanges(relay!)) > 0) return true;
        // Before issue 35: the write lands, the progress record covers the reused ids.
        const [r] = await query<{ covered: boolean }>(
          slotUrl,
          'SELECT coalesce(bool_or(published @> $1::bigint), false) AS covered FROM outbox_relay_progress',
          [String(crashedMax)],
        );
        return r!.covered;
      },
      { timeoutMs: 60_000, message: 'the outcome write of the crashed batch reaching the new primary' },
    );
    proxy.endSilent();

    // Every row of the new primary settled (recovered from the table, then streamed).
    await waitFor(async () => Number(await pendingOn(standby.url)) === 0, {
      timeoutMs: 90_000,
      message: async () => `rows still pending on the new primary: ${await pendingOn(standby.url)}`,
    });
    const rows = await query<{ event_id: string; s: number; status: string }>(
      standby.url,
      "SELECT event_id::text, (convert_from(payload, 'UTF8')::jsonb->>'s')::int AS s, status FROM outbox_with_status",
    );
    const have = new Set(rows.map((r) => r.event_id));
    let seen = new Map<string, number>();
    await waitFor(
      async () => {
        // Kept whole: a read cut short by the timeout must not leave a partial view.
        const now = new Map<string, number>();
        for (const m of await kafka.readAll(`outbox.event.${TYPE}`)) {
          const id = m.headers.id?.toString() ?? '';
          now.set(id, (now.get(id) ?? 0) + 1);
        }
        seen = now;
        return rows.every((r) => now.has(r.event_id));
      },
      { timeoutMs: 30_000, message: 'every event of the new primary in Kafka' },
    ).catch((e: unknown) => console.log(`PG ${version} ${delivery}: ${(e as Error).message}`));
    const lost = rows.filter((r) => !seen.has(r.event_id));
    const phantoms = [...seen.keys()].filter((id) => !have.has(id)).length;
    const duplicates = [...seen.values()].reduce((n, c) => n + c - 1, 0);
    const statuses: Record<string, number> = {};
    for (const r of rows) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    console.log(
      `PG ${version} ${delivery}: written on the new primary ${rows.length}, read back ${[...seen.values()].reduce((a, b) => a + b, 0)}, lost ${lost.length}, phantom ${phantoms}, duplicates ${duplicates}; statuses ${JSON.stringify(statuses)}; timeline changes ${await timelineChanges(relay)}`,
    );
    expect(lost.map((r) => r.s).slice(0, 20)).toEqual([]);
    expect(await timelineChanges(relay)).toBeGreaterThanOrEqual(1);
  }, 300_000);
});

/** Rows whose truthful status is still pending. */
async function pendingOn(url: string): Promise<string> {
  const [r] = await query<{ n: string }>(
    url,
    "SELECT count(*)::text AS n FROM outbox_with_status WHERE status = 'pending'",
  );
  return r!.n;
}

/** Rows the relay settled so far (published per the progress record). */
async function relayed(url: string): Promise<string> {
  const [r] = await query<{ n: string }>(
    url,
    "SELECT count(*)::text AS n FROM outbox_with_status WHERE status = 'published'",
  );
  return r!.n;
}

/** outbox_timeline_changes_total (0 where the relay has no such counter: before issue 35). */
async function timelineChanges(relay: Relay): Promise<number> {
  const c = (relay.metrics as Partial<Relay['metrics']>).timelineChanges;
  return c ? ((await c.get()).values[0]?.value ?? 0) : 0;
}

describe('a replication connection that goes silent (a host lost without a reset)', () => {
  let server: ThrowawayPostgres;
  let proxy: PgProxy;
  let relay: Relay | null = null;
  afterAll(async () => {
    await relay?.stop();
    await proxy?.stop();
    await server?.stop();
  });

  it('is given up after --replication-timeout-ms and the stream resumes on a new one', async () => {
    server = await startThrowawayPostgres();
    const slot = 'silent_stream';
    await migrateOn(server.url, slot);
    proxy = await PgProxy.start(server.port);
    const config = loadConfig(
      'run',
      [
        ...['--database-url', proxy.url(), '--slot', slot, '--sink', 'stdout', '--http-port', '0'],
        ...['--retry-initial-ms', '50', '--retry-max-ms', '500'],
        ...['--status-interval-ms', '200', '--replication-timeout-ms', '2000'],
      ],
      {},
    ).config;
    const sink = memorySink();
    relay = new Relay({ config, sink, log: silentLogger() });
    await relay.start();
    const writer = new Writer('Silent');
    writer.start(server.url);
    await waitFor(() => sink.published.length >= 100, { timeoutMs: 60_000, message: 'streaming' });
    await writer.stop();
    // The walsender is gone, the relay's end of the connection hears nothing, nothing resets it.
    proxy.silenceReplication();
    const before = writer.s;
    writer.start(server.url);
    await waitFor(() => writer.s >= before + 100, { timeoutMs: 30_000, message: 'writes after the silence' });
    await writer.stop();
    await waitFor(
      () => {
        const seen = new Set(sink.published.map((m) => JSON.parse(m.event.payload!.toString()).s as number));
        for (let s = 0; s < writer.s; s++) if (!seen.has(s)) return false;
        return true;
      },
      { timeoutMs: 60_000, message: 'every event streamed after the silent connection was given up' },
    );
    expect(sink.published.length).toBeGreaterThanOrEqual(writer.s);
  }, 180_000);
});

async function migrateOn(url: string, slot: string): Promise<void> {
  const c = new pg.Client(url);
  await c.connect();
  try {
    await migrate(c, { schema: 'public', table: 'outbox', publication: 'outbox_pub', slot });
  } finally {
    await c.end();
  }
}
