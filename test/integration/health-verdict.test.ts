import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/load.ts';
import { type HttpServer, startHttpServer } from '../../src/http/server.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { Finding, HealthVerdict } from '../../src/ops/status-report.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  migrateDb,
  slotOf,
  spawnCli,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * One health verdict, four places: `outbox-relay status --json` (a real process), the `health`
 * object of /readyz's body, the console's overview page and the outbox_health metrics of one
 * relay (in-process, its HTTP server reading the verdict every 200 ms instead of 15 s), against
 * real PostgreSQL and the run's real Kafka (auto-creation off), through a series of states:
 * healthy → failed events on a missing topic → dead events → healthy again (discarded) → the
 * relay stopped with the slot lagging and at risk.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: Relay;
let config: Config;
let http: HttpServer;
let base: string;

/** What each of the four shows, reduced to what they must agree on (ages in texts move). */
interface Shown {
  verdict: HealthVerdict;
  problems: { id: string; severity: string; topics: string[] }[];
}
const shape = (verdict: HealthVerdict, findings: Finding[]): Shown => ({
  verdict,
  problems: findings.map((f) => ({ id: f.id, severity: f.severity, topics: f.topics })),
});

async function cli(args: string[]) {
  const p = spawnCli([...args, '--database-url', db.url, '--slot', slotOf(db)]);
  const code = await p.exited;
  return { code, out: p.stdout(), err: p.logs() };
}

async function fromCli(): Promise<Shown & { exit: number | string; findings: Finding[] }> {
  // status judges as the relay does: the same routing and slot threshold.
  const r = await cli([
    'status',
    '--json',
    '--topic-template',
    config.topicTemplate,
    '--slot-critical-bytes',
    String(config.slotCriticalBytes),
  ]);
  const j = JSON.parse(r.out) as { verdict: HealthVerdict; findings: Finding[] };
  return { ...shape(j.verdict, j.findings), exit: r.code, findings: j.findings };
}

async function fromReadyz(): Promise<Shown & { status: number; findings: Finding[] }> {
  const r = await fetch(`${base}/readyz`);
  const j = (await r.json()) as { health: { verdict: HealthVerdict; findings: Finding[] } };
  return { ...shape(j.health.verdict, j.health.findings), status: r.status, findings: j.health.findings };
}

/** The overview page's verdict section, as a browser would read it (data attributes). */
async function fromConsole(): Promise<Shown> {
  const page = await (await fetch(`${base}/console/`)).text();
  const section =
    /<section class="verdict[^"]*" data-testid="verdict" data-verdict="(\w+)">([\s\S]*?)<\/section>/.exec(
      page,
    );
  if (!section) throw new Error(`no verdict section on the overview:\n${page.slice(0, 2000)}`);
  const problems = [
    ...section[2]!.matchAll(/<li class="finding finding-(\w+)" data-problem="(\w+)">([\s\S]*?)<\/li>/g),
  ].map((m) => ({
    id: m[2]!,
    severity: m[1]!,
    topics: [...m[3]!.matchAll(/data-testid="failing-topic">([^<]+)</g)].map((t) => t[1]!),
  }));
  return { verdict: section[1] as HealthVerdict, problems };
}

/** The metric: the verdict with value 1, and the problems with value 1 (their order is the label's). */
async function fromMetrics(): Promise<{ verdict: string | undefined; problems: string[] }> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const ones = (name: string, label: string) =>
    [...text.matchAll(new RegExp(`^${name}\\{${label}="(\\w+)"\\} 1$`, 'gm'))].map((m) => m[1]!);
  return {
    verdict: ones('outbox_health', 'verdict')[0],
    problems: ones('outbox_health_problems', 'problem').sort(),
  };
}

/**
 * Waits until the relay's reading shows `ids`, then checks that the CLI, /readyz, the console and
 * the metric agree on the verdict, the problems, their severities and the topics they name.
 */
async function agreeOn(verdict: HealthVerdict, ids: string[]) {
  await waitFor(
    async () => {
      const r = await fromReadyz();
      return r.verdict === verdict && r.problems.map((p) => p.id).join() === ids.join();
    },
    {
      timeoutMs: 30_000,
      message: async () => `/readyz shows ${verdict} ${ids}: ${JSON.stringify(await fromReadyz())}`,
    },
  );
  const readyz = await fromReadyz();
  const status = await fromCli();
  const shown = await fromConsole();
  const metric = await fromMetrics();
  expect({ verdict: status.verdict, problems: status.problems }).toEqual({
    verdict: readyz.verdict,
    problems: readyz.problems,
  });
  expect(shown).toEqual({ verdict: readyz.verdict, problems: readyz.problems });
  expect(metric).toEqual({ verdict, problems: [...ids].sort() });
  expect(status.exit).toBe(verdict === 'unhealthy' ? 69 : 0);
  // The fix is the same words everywhere (texts with ages may move between two readings).
  expect(status.findings.map((f) => f.fix)).toEqual(readyz.findings.map((f) => f.fix));
  return { status, readyz };
}

const ev = (type: string, id: string, seq: number) => ({
  aggregateType: type,
  aggregateId: id,
  eventType: 'E',
  payload: JSON.stringify({ seq }),
});
const statusOf = async (id: string) =>
  (await db.query<{ status: string }>('SELECT status FROM outbox_with_status WHERE id = $1', [id]))[0]!
    .status;

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Fine', 1);
  config = testConfig(
    db,
    // A refused event stays failed (10 min back-off) until an operator resends it; two attempts make it dead.
    ['--max-attempts', '2', '--failure-backoff-ms', '600000', '--sweep-interval-ms', '100'],
    kafka,
  );
  relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
  await waitFor(() => relay.state === 'streaming', { message: 'relay streaming' });
  http = await startHttpServer({
    port: 0,
    host: '127.0.0.1',
    relay,
    slot: config.slot,
    log: silentLogger(),
    health: { config, everyMs: 200 },
    console: { config },
  });
  base = `http://127.0.0.1:${http.port}`;
}, 120_000);

afterAll(async () => {
  await http?.close();
  await relay?.stop();
  await relay?.done();
  await kafka?.stop();
});

describe('one health verdict: status, /readyz, the console and the metric agree', () => {
  let refused: string;

  it('healthy: events published, the relay streaming', async () => {
    const [id] = await insertEvents(db.pool, [ev('Fine', 'f-1', 1)]);
    await waitFor(async () => (await statusOf(id!)) === 'published', { message: 'published' });
    const { readyz } = await agreeOn('healthy', []);
    expect(readyz.status).toBe(200);
  });

  it('degraded: a failed event on a missing topic, named with what to do', async () => {
    [refused] = (await insertEvents(db.pool, [ev('Missing', 'm-1', 1)])) as [string];
    await waitFor(async () => (await statusOf(refused)) === 'failed', { message: 'failed' });
    const { status, readyz } = await agreeOn('degraded', ['failed_events']);
    const topic = kafka.topic('outbox.event.Missing');
    expect(status.problems[0]!.topics).toEqual([topic]);
    expect(status.findings[0]!.fix).toContain(`create the topic: kafka-topics.sh`);
    expect(status.findings[0]!.fix).toContain(`--create --topic ${topic}`);
    // Readiness is about this instance streaming, not about the events: still 200.
    expect(readyz.status).toBe(200);
  });

  it('unhealthy: the event dead after an operator resend failed again', async () => {
    const resend = await cli(['events', 'resend', refused]);
    expect(resend.code, resend.err).toBe(0);
    await waitFor(async () => (await statusOf(refused)) === 'dead', { timeoutMs: 30_000, message: 'dead' });
    const { status, readyz } = await agreeOn('unhealthy', ['dead_events']);
    expect(status.findings[0]!.text).toMatch(
      new RegExp(
        `^1 dead event\\(s\\) \\(${kafka.topic('outbox.event.Missing').replace(/\./g, '\\.')}: UNKNOWN_TOPIC_OR_PARTITION\\)`,
      ),
    );
    expect(readyz.findings[0]!.text).toBe(status.findings[0]!.text);
    // The verdict is in the body; the answer stays readiness (this instance streams).
    expect(readyz.status).toBe(200);
  });

  it('healthy again once the operator discarded it', async () => {
    const discard = await cli(['events', 'discard', refused, '--yes']);
    expect(discard.code, discard.err).toBe(0);
    await agreeOn('healthy', []);
  });

  it('unhealthy: the relay stopped, the slot inactive, retaining WAL over the threshold, events waiting', async () => {
    await relay.stop();
    await relay.done();
    // Events committed 5 minutes ago that nobody relays: the lag.
    await db.query(
      `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, created_at)
       VALUES ('Fine', 'f-2', 'E', convert_to('{}', 'UTF8'), now() - interval '5 minutes')`,
    );
    // The operator's threshold, for the relay's reading and the CLI alike: any retained WAL is too much.
    await http.close();
    config = { ...config, slotCriticalBytes: 1 };
    http = await startHttpServer({
      port: 0,
      host: '127.0.0.1',
      relay,
      slot: config.slot,
      log: silentLogger(),
      health: { config, everyMs: 200 },
      console: { config },
    });
    base = `http://127.0.0.1:${http.port}`;
    const { readyz } = await agreeOn('unhealthy', ['slot_at_risk', 'slot_inactive', 'relay_stopped', 'lag']);
    expect(readyz.status).toBe(503);
  });

  it('unknown while the status cannot be read: the same everywhere, and `status` exits 69 for it too', async () => {
    await http.close();
    // Nothing listens on port 1: the relay's reading fails as a database outage would.
    const unreachable = { ...config, databaseUrl: 'postgres://postgres@127.0.0.1:1/none' };
    http = await startHttpServer({
      port: 0,
      host: '127.0.0.1',
      relay,
      slot: config.slot,
      log: silentLogger(),
      health: { config: unreachable, everyMs: 200 },
      console: { config },
    });
    base = `http://127.0.0.1:${http.port}`;
    await waitFor(async () => (await fromReadyz()).verdict === 'unknown', { message: '/readyz: unknown' });
    const readyz = await fromReadyz();
    expect(readyz.problems).toEqual([{ id: 'status_unreadable', severity: 'unhealthy', topics: [] }]);
    expect(readyz.findings[0]!.text).toMatch(/^cannot read the status from PostgreSQL: .*ECONNREFUSED/);
    expect(await fromConsole()).toEqual({ verdict: 'unknown', problems: readyz.problems });
    expect(await fromMetrics()).toEqual({ verdict: 'unknown', problems: ['status_unreadable'] });
    const p = spawnCli(['status', '--database-url', unreachable.databaseUrl, '--slot', slotOf(db)]);
    expect(await p.exited).toBe(69);
  });
});
