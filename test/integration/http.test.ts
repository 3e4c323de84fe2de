import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, type RelayProcess, slotOf, spawnRelayWithHttp } from '../support/relay.ts';

/**
 * The HTTP endpoints of real relay processes (the CLI, as deployed): metrics, liveness through a
 * broker outage, and readiness of an active relay and its hot standby on the same slot.
 */
const db = useTestDatabase();
let kafka: DedicatedKafka;
const relays: RelayProcess[] = [];

/** Starts `run` with an ephemeral HTTP port and returns a getter bound to that port. */
async function startRelay() {
  const r = await spawnRelayWithHttp(db, kafka);
  relays.push(r.relay);
  return r;
}

type Endpoint = Awaited<ReturnType<typeof startRelay>>['get'];

async function metricValue(get: Endpoint, series: string): Promise<number | undefined> {
  const line = (await get('/metrics')).text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

let active: Awaited<ReturnType<typeof startRelay>>;

beforeAll(async () => {
  kafka = await startDedicatedKafka({ proxy: true });
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Order', 2);
  active = await startRelay();
  await waitFor(async () => (await active.get('/readyz')).status === 200, {
    timeoutMs: 30_000,
    message: () => `active relay ready; logs:\n${active.relay.logs().slice(-2000)}`,
  });
});

afterAll(async () => {
  for (const r of relays) r.kill('SIGKILL');
  await kafka?.stop();
});

const order = (id: string) => ({
  aggregateType: 'Order',
  aggregateId: id,
  eventType: 'OrderPlaced',
  payload: '{}',
});

describe('HTTP endpoints of a running relay', () => {
  it('/readyz and /healthz answer 200 with state, slot and position while streaming', async () => {
    const ready = await active.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json()).toMatchObject({ state: 'streaming', slot: slotOf(db) });
    expect(ready.json().confirmedLsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect(ready.json()).not.toHaveProperty('reason');
    const live = await active.get('/healthz');
    expect(live.status).toBe(200);
    expect(live.json()).toMatchObject({ state: 'streaming', slot: slotOf(db) });
  });

  it('/metrics exposes the core relay metrics and the default process metrics', async () => {
    await insertEvents(db.pool, [order('o-1'), order('o-2'), order('o-3')]);
    await waitFor(
      async () =>
        (await metricValue(active.get, 'outbox_events_published_total{topic="outbox.event.Order"}')) === 3,
      { message: '3 events counted as published' },
    );
    const text = (await active.get('/metrics')).text;
    for (const series of [
      'outbox_relay_state{state="streaming"} 1',
      'outbox_relay_state{state="waiting"} 0',
      'outbox_inflight_events ',
      'outbox_confirmed_lsn ',
      'outbox_broker_outage 0',
      'outbox_publish_batch_seconds_count ',
      'outbox_end_to_end_lag_seconds_bucket{le="+Inf"} 3',
      '# TYPE outbox_replication_reconnects_total counter',
      '# TYPE outbox_transient_errors_total counter',
      'process_cpu_user_seconds_total ',
      'process_resident_memory_bytes ',
      'nodejs_eventloop_lag_seconds ',
      'nodejs_heap_size_used_bytes ',
    ]) {
      expect(text, series).toContain(series);
    }
    expect(await metricValue(active.get, 'outbox_confirmed_lsn')).toBeGreaterThan(0);
  });

  it('stays live and ready through a broker outage, which /healthz names', async () => {
    // The broker becomes unreachable (connections refused) behind the fault proxy.
    kafka.proxies[0]!.cut();
    try {
      await insertEvents(db.pool, [order('o-4')]);
      await waitFor(async () => (await metricValue(active.get, 'outbox_broker_outage')) === 1, {
        timeoutMs: 20_000,
        message: 'outbox_broker_outage = 1',
      });
      const live = await active.get('/healthz');
      expect(live.status).toBe(200);
      expect(live.json()).toMatchObject({ state: 'streaming', reason: 'broker-outage' });
      expect((await active.get('/readyz')).status).toBe(200);
    } finally {
      kafka.proxies[0]!.restore();
    }
    await waitFor(async () => (await metricValue(active.get, 'outbox_broker_outage')) === 0, {
      timeoutMs: 20_000,
      message: 'outage over',
    });
  });

  it('a second relay on the same slot is a live standby (503 standby), and takes over when the first stops', async () => {
    const standby = await startRelay();
    await waitFor(async () => (await standby.get('/readyz')).json().reason === 'standby', {
      timeoutMs: 20_000,
      message: async () => `standby reason; readyz: ${(await standby.get('/readyz')).text}`,
    });
    const ready = await standby.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json()).toMatchObject({ state: 'standby', slot: slotOf(db), reason: 'standby' });
    expect(ready.json().detail).toMatch(/led by another relay|active/);
    const live = await standby.get('/healthz');
    expect(live.status).toBe(200);
    expect(live.json()).toMatchObject({ reason: 'standby' });
    const metrics = (await standby.get('/metrics')).text;
    expect(metrics).toContain('outbox_relay_state{state="standby"} 1');
    expect(metrics).toContain('outbox_relay_state{state="waiting"} 0');
    expect((await active.get('/readyz')).status).toBe(200);

    active.relay.kill('SIGTERM');
    expect(await active.relay.exited).toBe(0);
    await waitFor(async () => (await standby.get('/readyz')).status === 200, {
      timeoutMs: 30_000,
      message: 'standby took over',
    });
    standby.relay.kill('SIGTERM');
    expect(await standby.relay.exited).toBe(0);
  });
});
