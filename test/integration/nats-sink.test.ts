import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { NatsSink } from '../../src/sinks/nats/nats-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { ThrowawayNats } from '../support/nats-server.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  orderViolations,
  slotPosition,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * The NATS JetStream sink against a real nats-server -js of this file (never the machine's
 * shared one): the relay streams real outbox rows, an independent ordered consumer reads the
 * stream back. Each stream/subject namespace is a test's own.
 */
const db = useTestDatabase();
let nats: ThrowawayNats;
let relay: Relay | null = null;

const FAST = [
  '--retry-initial-ms',
  '50',
  '--retry-max-ms',
  '1000',
  '--nats-timeout-ms',
  '2000',
  '--failure-backoff-ms',
  '60000',
  '--status-interval-ms',
  '300',
];

function natsConfig(prefix: string, extra: string[] = []) {
  return testConfig(db, [
    '--sink',
    'nats',
    '--nats-servers',
    nats.url,
    '--topic-template',
    `${prefix}.{aggregate_type}`,
    ...FAST,
    ...extra,
  ]);
}

async function startRelay(prefix: string, extra: string[] = []): Promise<Relay> {
  const config = natsConfig(prefix, extra);
  relay = await startRelayInProcess(config, new NatsSink(config, silentLogger()));
  await waitFor(() => relay!.state === 'streaming', { timeoutMs: 60_000, message: 'relay streaming' });
  return relay;
}

async function statuses(ids: string[]): Promise<Map<string, { status: string; last_error: string | null }>> {
  const r = await db.query<{ id: string; status: string; last_error: string | null }>(
    'SELECT o.id::text AS id, status, last_error FROM outbox_with_status o WHERE o.id = ANY($1::bigint[])',
    [ids],
  );
  return new Map(r.map((x) => [x.id, x]));
}

async function settled(ids: string[], timeoutMs = 60_000): Promise<void> {
  await waitFor(async () => [...(await statuses(ids)).values()].every((s) => s.status !== 'pending'), {
    timeoutMs,
    message: async () => {
      const s = [...(await statuses(ids)).values()].filter((x) => x.status === 'pending');
      return `${s.length} of ${ids.length} events still pending`;
    },
  });
}

/** Inserts `perKey` events for each of `keys` keys, one transaction per round, `{seq}` payloads. */
async function insertRounds(
  aggregateType: string,
  keys: number,
  rounds: number,
  from = 0,
): Promise<string[]> {
  const ids: string[] = [];
  for (let s = from; s < from + rounds; s++) {
    const rows = [];
    for (let k = 0; k < keys; k++)
      rows.push({
        aggregateType,
        aggregateId: `k${k}`,
        eventType: 'Tick',
        payload: JSON.stringify({ seq: s }),
      });
    ids.push(...(await insertEvents(db.pool, rows)));
  }
  return ids;
}

/** What the stream holds of `{seq}` events: the per-key order check, losses, stored duplicates. */
async function report(stream: string, keys: number, rounds: number) {
  const stored = await nats.readAll(stream);
  const seen = stored.map((m) => ({
    key: m.headers.aggregate_id ?? '',
    seq: (JSON.parse(m.data.toString()) as { seq: number }).seq,
    msgId: m.headers['Nats-Msg-Id'],
  }));
  const unique = new Set(seen.map((s) => `${s.key}#${s.seq}`));
  const missing: string[] = [];
  for (let k = 0; k < keys; k++)
    for (let s = 0; s < rounds; s++) if (!unique.has(`k${k}#${s}`)) missing.push(`k${k}#${s}`);
  return { stored, seen, missing, duplicates: seen.length - unique.size, violations: orderViolations(seen) };
}

beforeAll(async () => {
  nats = await ThrowawayNats.start();
  await migrateDb(db);
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
});

afterAll(async () => {
  await nats?.stop();
});

describe('NATS JetStream sink', () => {
  it('publishes every event with Nats-Msg-Id = event id and its headers; an independent consumer reads them back in order', async () => {
    await nats.addStream({ name: 'HAPPY', subjects: ['happy.>'] });
    await startRelay('happy');
    const ids = await insertRounds('Order', 5, 40);
    const { commitLsn } = await insertEventsReportingCommit(db, [
      {
        aggregateType: 'Customer',
        aggregateId: 'c1',
        eventType: 'Created',
        payload: '{"seq":0}',
        headers: { tenant: 'acme' },
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      },
    ]);
    await settled(ids);
    const r = await report('HAPPY', 5, 40);
    const orders = r.stored.filter((m) => m.subject === 'happy.Order');
    expect(orders).toHaveLength(200);
    expect(r.missing).toEqual([]);
    expect(r.violations).toEqual([]);
    const eventIds = await db.query<{ id: string; event_id: string }>(
      'SELECT id::text, event_id::text FROM outbox WHERE id = ANY($1::bigint[])',
      [ids],
    );
    expect(new Set(orders.map((m) => m.headers['Nats-Msg-Id']))).toEqual(
      new Set(eventIds.map((e) => e.event_id)),
    );
    const customer = r.stored.find((m) => m.subject === 'happy.Customer')!;
    expect(customer).toBeDefined();
    expect(customer.headers.tenant).toBe('acme');
    expect(customer.headers.traceparent).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    // The slot moves past the commit once everything is acknowledged.
    await waitFor(async () => (await slotPosition(db)).confirmed >= commitLsn, {
      message: 'slot confirmed past the last commit',
    });
  });
});
