import { fromBinary, fromJsonString } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvelopeSchema } from '../../src/gen/outbox/v1/envelope_pb.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  slotOf,
  slotPosition,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

const db = useTestDatabase();
let kafka: DedicatedKafka;
let relay: Relay;

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

async function published(ids: string[]): Promise<number> {
  const r = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM outbox_with_status WHERE id = ANY($1::bigint[]) AND status = 'published'`,
    [ids],
  );
  return Number(r[0]!.n);
}

beforeAll(async () => {
  // Independent steps side by side: the broker's start (a JVM) dominates.
  [kafka] = await Promise.all([startDedicatedKafka(), migrateDb(db)]);
  await Promise.all([
    kafka.createTopic('outbox.event.Order', 3),
    kafka.createTopic('outbox.event.Customer', 1),
    kafka.createTopic('billing.invoices', 2),
    kafka.createTopic('outbox.event.EnvBin', 1),
    kafka.createTopic('outbox.event.EnvJson', 1),
  ]);
  const config = testConfig(
    db,
    [
      '--topic-override',
      'Invoice=billing.invoices',
      '--value-format-override',
      'EnvBin=envelope-protobuf',
      '--value-format-override',
      'EnvJson=envelope-json',
      '--status-interval-ms',
      '300',
    ],
    kafka,
  );
  relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
  await waitFor(() => relay.state === 'streaming', { message: 'relay streaming' });
});

afterAll(async () => {
  await relay?.stop();
  await kafka?.stop();
});

describe('relay → Kafka', () => {
  it('routes topic, key, headers, value and timestamp as specified', async () => {
    const [orderId, custId, invId, tombId] = await insertEvents(db.pool, [
      {
        aggregateType: 'Order',
        aggregateId: 'o-1',
        eventType: 'OrderPlaced',
        payload: '{"total":42}',
        // Header values are strings (a row with any other value is recorded failed: hostile-rows.test.ts).
        headers: { tenant: 'acme', retries: '3', tracestate: 'vendor=x' },
        traceparent: TRACEPARENT,
      },
      {
        aggregateType: 'Customer',
        aggregateId: 'c-1',
        eventType: 'CustomerRegistered',
        payload: Buffer.from([0, 1, 2, 255]),
        contentType: 'application/x-protobuf',
      },
      { aggregateType: 'Invoice', aggregateId: 'i-1', eventType: 'InvoiceIssued', payload: '{}' },
      { aggregateType: 'Order', aggregateId: 'o-2', eventType: 'OrderDeleted', payload: null },
    ]);
    await waitFor(async () => (await published([orderId!, custId!, invId!, tombId!])) === 4, {
      message: 'rows published',
    });
    const rows = await db.query<{ id: string; event_id: string; created_at: Date }>(
      'SELECT o.id::text AS id, event_id::text, created_at FROM outbox o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
      [[orderId, custId, invId, tombId]],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));

    const orders = await kafka.readAll('outbox.event.Order');
    const order = orders.find((m) => m.key?.toString() === 'o-1')!;
    expect(order.value?.toString()).toBe('{"total":42}');
    expect(order.timestamp).toBe(byId.get(orderId!)!.created_at.getTime());
    const h = Object.fromEntries(Object.entries(order.headers).map(([k, v]) => [k, v.toString()]));
    expect(h).toEqual({
      id: byId.get(orderId!)!.event_id,
      event_type: 'OrderPlaced',
      aggregate_type: 'Order',
      aggregate_id: 'o-1',
      'content-type': 'application/json',
      traceparent: TRACEPARENT,
      tenant: 'acme',
      retries: '3',
      tracestate: 'vendor=x',
    });
    const tomb = orders.find((m) => m.key?.toString() === 'o-2')!;
    expect(tomb.value).toBeNull();

    const customers = await kafka.readAll('outbox.event.Customer');
    expect(customers).toHaveLength(1);
    expect([...customers[0]!.value!]).toEqual([0, 1, 2, 255]);
    expect(customers[0]!.headers['content-type']?.toString()).toBe('application/x-protobuf');

    const invoices = await kafka.readAll('billing.invoices');
    expect(invoices.map((m) => m.key?.toString())).toEqual(['i-1']);
  });

  it('encodes the value as an outbox.v1.Envelope for the aggregate types configured so, which a consumer decodes with the generated code', async () => {
    const [binId, jsonId] = await insertEvents(db.pool, [
      {
        aggregateType: 'EnvBin',
        aggregateId: 'e-1',
        eventType: 'Shipped',
        payload: '{"parcel":7}',
        headers: { event_version: '3', source: 'shop' },
        traceparent: TRACEPARENT,
      },
      { aggregateType: 'EnvJson', aggregateId: 'e-2', eventType: 'Billed', payload: '{"cents":99}' },
    ]);
    await waitFor(async () => (await published([binId!, jsonId!])) === 2, { message: 'both published' });
    const [bin] = await kafka.readAll('outbox.event.EnvBin');
    const [json] = await kafka.readAll('outbox.event.EnvJson');
    const h = (r: typeof bin, k: string) => r!.headers[k]?.toString();
    expect(h(bin, 'content-type')).toBe('application/x-protobuf; messageType=outbox.v1.Envelope');
    const env = fromBinary(EnvelopeSchema, bin!.value!);
    expect(env.eventId).toBe(h(bin, 'id'));
    expect([env.aggregateType, env.aggregateId, env.eventType]).toEqual(['EnvBin', 'e-1', 'Shipped']);
    expect(env.eventVersion).toBe(3);
    expect(env.source).toBe('shop');
    expect(env.traceparent).toBe(TRACEPARENT);
    expect(env.contentType).toBe('application/json');
    expect(Buffer.from(env.payload).toString()).toBe('{"parcel":7}');
    expect(h(json, 'content-type')).toBe('application/json');
    const envJson = fromJsonString(EnvelopeSchema, json!.value!.toString());
    expect([envJson.aggregateId, Buffer.from(envJson.payload).toString()]).toEqual(['e-2', '{"cents":99}']);
  });

  it('keeps per-key order across topics and partitions, and confirms the slot past published rows', async () => {
    const rows = [];
    for (let seq = 0; seq < 60; seq++) {
      rows.push({
        aggregateType: 'Order',
        aggregateId: `k-${seq % 7}`,
        eventType: 'Step',
        payload: JSON.stringify({ seq }),
      });
    }
    const ids = [
      ...(await insertEvents(db.pool, rows.slice(0, 30))),
      ...(await insertEvents(db.pool, rows.slice(30))),
    ];
    const lsnAfter = (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l'))[0]!.l;
    await waitFor(async () => (await published(ids)) === 60, { message: '60 rows published' });
    const got = (await kafka.readAll('outbox.event.Order')).filter((m) => m.key?.toString().startsWith('k-'));
    const perKey = new Map<string, number[]>();
    for (const m of got) {
      const k = m.key!.toString();
      perKey.set(k, [...(perKey.get(k) ?? []), JSON.parse(m.value!.toString()).seq]);
    }
    for (const [k, seqs] of perKey) {
      expect(seqs, `order of ${k}`).toEqual([...seqs].sort((a, b) => a - b));
    }
    expect([...perKey.values()].flat().length).toBe(60);
    await waitFor(
      async () => {
        const s = await slotPosition(db);
        const r = await db.query<{ ok: boolean }>('SELECT $1::pg_lsn >= $2::pg_lsn AS ok', [
          s.confirmed,
          lsnAfter,
        ]);
        return r[0]!.ok;
      },
      { message: 'slot confirmed past the inserted rows' },
    );
  });

  it('does not advance the slot while the broker is down, then delivers everything when it returns', async () => {
    // Settle everything before the outage.
    await waitFor(
      async () =>
        (
          await db.query<{ n: string }>(
            `SELECT count(*)::text AS n FROM outbox_with_status WHERE status = 'pending'`,
          )
        )[0]!.n === '0',
    );
    const before = await slotPosition(db);
    const ids: string[] = [];
    // kill -9 of the (only) broker mid-stream; restarted below from its data directory.
    await kafka.cluster.kill(1);
    let firstCommit = '';
    try {
      for (let i = 0; i < 5; i++) {
        const { ids: got, commitLsn } = await insertEventsReportingCommit(db, [
          {
            aggregateType: 'Order',
            aggregateId: 'down-1',
            eventType: 'E',
            payload: JSON.stringify({ seq: i }),
          },
        ]);
        ids.push(...got);
        if (i === 0) firstCommit = commitLsn;
      }
      // Let keepalives and status updates flow for a while: none may confirm past the start of the
      // first unpublished transaction's commit record (the server skips, on restart, every
      // transaction whose commit starts below confirmed_flush_lsn). Positions below it are fair
      // game: the relay's own status updates and other WAL move the server's end between commits.
      for (let t = 0; t < 10; t++) {
        await new Promise((r) => setTimeout(r, 200));
        const s = await slotPosition(db);
        const r = await db.query<{ ok: boolean }>('SELECT $1::pg_lsn <= $2::pg_lsn AS ok', [
          s.confirmed,
          firstCommit,
        ]);
        expect(
          r[0]!.ok,
          `confirmed ${s.confirmed} must stay at or below the first commit ${firstCommit} (was ${before.confirmed})`,
        ).toBe(true);
        expect(await published(ids)).toBe(0);
      }
      await waitFor(async () => (await relay.metrics.brokerOutage.get()).values[0]?.value === 1, {
        timeoutMs: 20_000,
        message: 'outage reported by the gauge',
      });
      const during = await slotPosition(db);
      expect(
        (
          await db.query<{ ok: boolean }>('SELECT $1::pg_lsn <= $2::pg_lsn AS ok', [
            during.confirmed,
            firstCommit,
          ])
        )[0]!.ok,
      ).toBe(true);
    } finally {
      await kafka.cluster.start(1);
    }
    await waitFor(async () => (await published(ids)) === 5, {
      timeoutMs: 30_000,
      progress: () => published(ids),
      message: 'rows published after the broker returned',
    });
    const seqs = (await kafka.readAll('outbox.event.Order'))
      .filter((m) => m.key?.toString() === 'down-1')
      .map((m) => JSON.parse(m.value!.toString()).seq);
    expect(new Set(seqs)).toEqual(new Set([0, 1, 2, 3, 4]));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    await waitFor(
      async () => {
        const s = await slotPosition(db);
        return (
          await db.query<{ ok: boolean }>('SELECT $1::pg_lsn > $2::pg_lsn AS ok', [s.confirmed, firstCommit])
        )[0]!.ok;
      },
      { message: 'slot advanced after recovery' },
    );
  });

  it('advances the slot while the outbox is idle and another table churns (idle advancement)', async () => {
    await db.query('CREATE TABLE IF NOT EXISTS churn (id serial primary key, filler text)');
    let maxRetainedLate = 0;
    for (let round = 0; round < 12; round++) {
      await db.query(`INSERT INTO churn (filler) SELECT repeat('x', 500) FROM generate_series(1, 4000)`);
      await new Promise((r) => setTimeout(r, 250));
      if (round >= 6) maxRetainedLate = Math.max(maxRetainedLate, (await slotPosition(db)).retainedBytes);
    }
    // ~2 MB of WAL per round, ~24 MB in all: without idle advancement retained WAL would grow past it.
    await waitFor(async () => (await slotPosition(db)).retainedBytes < 1024 * 1024, {
      timeoutMs: 10_000,
      message: async () => `retained WAL below 1 MiB (is ${(await slotPosition(db)).retainedBytes})`,
    });
    expect(maxRetainedLate).toBeLessThan(12 * 1024 * 1024);
  });

  it('reconnects after the walsender is terminated and loses nothing', async () => {
    const ids1 = await insertEvents(db.pool, [
      { aggregateType: 'Order', aggregateId: 'rc', eventType: 'E', payload: '{"seq":0}' },
    ]);
    await waitFor(async () => (await published(ids1)) === 1);
    const reconnects = (await relay.metrics.replicationReconnects.get()).values[0]?.value ?? 0;
    await db.query(
      'SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active',
      [slotOf(db)],
    );
    const ids2 = await insertEvents(db.pool, [
      { aggregateType: 'Order', aggregateId: 'rc', eventType: 'E', payload: '{"seq":1}' },
    ]);
    await waitFor(async () => (await published(ids2)) === 1, {
      timeoutMs: 20_000,
      message: 'event after reconnect published',
    });
    expect((await relay.metrics.replicationReconnects.get()).values[0]?.value).toBeGreaterThan(reconnects);
    const seqs = (await kafka.readAll('outbox.event.Order'))
      .filter((m) => m.key?.toString() === 'rc')
      .map((m) => JSON.parse(m.value!.toString()).seq);
    expect(new Set(seqs)).toEqual(new Set([0, 1]));
  });

  it('a second relay on the same slot waits, then takes over when the first stops', async () => {
    const config = testConfig(db, ['--status-interval-ms', '300'], kafka);
    const second = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
    try {
      await waitFor(() => second.state === 'standby', { message: 'second relay in standby' });
      expect(second.waitingReason).toMatch(/led by another relay/);
      await relay.stop();
      await waitFor(() => second.state === 'streaming', {
        timeoutMs: 15_000,
        message: 'second relay took over',
      });
      const ids = await insertEvents(db.pool, [
        { aggregateType: 'Order', aggregateId: 'takeover', eventType: 'E', payload: '{}' },
      ]);
      await waitFor(async () => (await published(ids)) === 1, { message: 'published by the second relay' });
    } finally {
      relay = second; // afterAll stops it
    }
  });
});
