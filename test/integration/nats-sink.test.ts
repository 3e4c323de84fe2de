import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { parseLsn } from '../../src/replication/lsn.ts';
import { NatsSink } from '../../src/sinks/nats/nats-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { ThrowawayNats } from '../support/nats-server.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  type RelayProcess,
  slotOf,
  slotPosition,
  spawnCli,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';
import { seqReport, sinkLoad } from '../support/sink-load.ts';

/**
 * The NATS JetStream sink against a real nats-server -js of this file (never the machine's
 * shared one): the relay streams real outbox rows, an independent ordered consumer reads the
 * stream back. Each stream/subject namespace is a test's own.
 */
const db = useTestDatabase();
const { statuses, settled, insertRounds, backgroundInserts, faultMidStream } = sinkLoad(db);
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

let sink: NatsSink | null = null;

async function startRelay(prefix: string, extra: string[] = []): Promise<Relay> {
  const config = natsConfig(prefix, extra);
  sink = new NatsSink(config, silentLogger());
  relay = await startRelayInProcess(config, sink);
  await waitFor(() => relay!.state === 'streaming', { timeoutMs: 60_000, message: 'relay streaming' });
  return relay;
}

/** What the stream holds of `{seq}` events: losses, stored duplicates, the per-key order check. */
async function report(stream: string, keys: number, rounds: number) {
  const stored = await nats.readAll(stream);
  const seen = stored.map((m) => ({
    key: m.headers.aggregate_id ?? '',
    seq: (JSON.parse(m.data.toString()) as { seq: number }).seq,
  }));
  return { stored, ...seqReport(seen, keys, rounds) };
}

beforeAll(async () => {
  nats = await ThrowawayNats.start();
  await migrateDb(db);
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
  // A test's failed events must not be retried by a later test's sweeper into that test's
  // destinations (its template routes them there): the file's tests share one database.
  await db.pool.query(`UPDATE outbox SET status = 'discarded' WHERE status IN ('failed', 'dead', 'parked')`);
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
    await waitFor(async () => parseLsn((await slotPosition(db)).confirmed) > parseLsn(commitLsn), {
      message: 'slot confirmed past the last commit',
    });
  });

  it('kill -9 of the server mid-stream: nothing confirmed while it is down, 0 lost, key order kept, re-sends removed by the duplicate window', async () => {
    await nats.addStream({ name: 'KILL', subjects: ['kill.>'] });
    const relay = await startRelay('kill');
    const load = backgroundInserts('Acct', 8);
    const rounds = await faultMidStream({
      relay,
      load,
      stored: () => nats.streamMessages('KILL'),
      flowing: 200,
      aggregateType: 'Acct',
      marker: 'during-outage',
      fault: () => nats.kill9(),
      recover: () => nats.restart(),
      roundsDuring: 20,
      roundsAfter: 40,
    });
    await settled(load.ids, 120_000);
    const rep = await report('KILL', 8, rounds);
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
    expect(rep.stored.filter((m) => m.headers.aggregate_id === 'during-outage')).toHaveLength(1);
    // Every re-send came within the window: the stream holds each event once.
    console.log(
      `kill -9: ${rounds * 8} events, ${sink!.duplicateAcks} re-sends dropped by the duplicate window`,
    );
    expect(rep.duplicates).toBe(0);
    expect(new Set(rep.stored.map((m) => m.headers['Nats-Msg-Id'])).size).toBe(rep.stored.length);
  });

  it('a frozen server (SIGSTOP): PubAck timeouts are transient, nothing confirmed meanwhile, everything arrives once after SIGCONT', async () => {
    await nats.addStream({ name: 'FREEZE', subjects: ['freeze.>'] });
    const relay = await startRelay('freeze');
    const load = backgroundInserts('Acct', 6);
    const rounds = await faultMidStream({
      relay,
      load,
      stored: () => nats.streamMessages('FREEZE'),
      flowing: 100,
      aggregateType: 'Acct',
      marker: 'during-freeze',
      fault: () => nats.freeze(),
      recover: () => nats.thaw(),
      roundsAfter: 30,
    });
    await settled(load.ids, 120_000);
    const rep = await report('FREEZE', 6, rounds);
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
    console.log(
      `SIGSTOP: ${rounds * 6} events, ${sink!.duplicateAcks} re-sends dropped by the duplicate window`,
    );
    expect(rep.duplicates).toBe(0);
    expect(rep.stored.filter((m) => m.headers.aggregate_id === 'during-freeze')).toHaveLength(1);
  });

  it('relay kill -9 storm: every kill while PubAcks are in flight; 0 lost, key order kept, re-sends dropped by the window', async () => {
    await nats.addStream({ name: 'STORM', subjects: ['storm.>'] });
    const args = [
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      '--sink',
      'nats',
      '--nats-servers',
      nats.url,
      '--topic-template',
      'storm.{aggregate_type}',
      ...FAST,
    ];
    const load = backgroundInserts('Storm', 10);
    onTestFinished(() => void load.stop());
    let current: RelayProcess | null = null;
    onTestFinished(() => current?.kill('SIGKILL'));
    const KILLS = 5;
    for (let k = 0; k < KILLS; k++) {
      current = spawnCli(args);
      await current.waitForLog(/streaming from the slot/, 60_000);
      // Killed once it made progress (the stream grew), with the load still coming: PubAcks in flight.
      const before = await nats.streamMessages('STORM');
      await waitFor(async () => (await nats.streamMessages('STORM')) >= before + 200, {
        timeoutMs: 60_000,
        message: `relay ${k} publishing`,
      });
      current.kill('SIGKILL');
      expect(await current.exited).toBe('SIGKILL');
    }
    const rounds = await load.stop();
    current = spawnCli(args);
    await current.waitForLog(/streaming from the slot/, 60_000);
    await settled(load.ids, 120_000);
    current.kill('SIGTERM');
    expect(await current.exited).toBe(0);
    current = null;
    const rep = await report('STORM', 10, rounds);
    console.log(`relay kill -9 storm: ${KILLS} kills, ${rounds * 10} events, ${rep.stored.length} stored`);
    expect(rep.missing).toEqual([]);
    expect(rep.violations).toEqual([]);
    expect(rep.duplicates).toBe(0);
  }, 400_000);

  it('a stream that is full (discard new) fails those events permanently; the stream goes on', async () => {
    await nats.addStream({ name: 'FULL', subjects: ['full.Small'], max_msgs: 5, discard: 'new' as never });
    await nats.addStream({ name: 'ROOMY', subjects: ['full.Other'] });
    await startRelay('full', ['--ordering', 'relaxed']);
    const rows = Array.from({ length: 8 }, (_, i) => ({
      aggregateType: 'Small',
      aggregateId: `s${i}`,
      eventType: 'Tick',
      payload: `{"seq":${i}}`,
    }));
    const ids = await insertEvents(db.pool, rows);
    const later = await insertEvents(db.pool, [
      { aggregateType: 'Other', aggregateId: 'o1', eventType: 'Tick', payload: '{"seq":0}' },
    ]);
    await settled([...ids, ...later]);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual([
      ...Array(5).fill('published'),
      ...Array(3).fill('failed'),
    ]);
    for (const id of ids.slice(5))
      expect(st.get(id)!.last_error).toMatch(/STREAM_FULL|maximum messages exceeded/);
    expect((await statuses(later)).get(later[0]!)!.status).toBe('published');
    expect(await nats.streamMessages('FULL')).toBe(5);
  });

  it('a row header named like a JetStream control header (Nats-Rollup) fails that event; it never reaches the stream', async () => {
    await nats.addStream({ name: 'HOSTILE', subjects: ['hostile.>'], allow_rollup_hdrs: true });
    await startRelay('hostile', ['--ordering', 'relaxed']);
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'T', aggregateId: 't1', eventType: 'Tick', payload: '{"seq":0}' },
      {
        aggregateType: 'T',
        aggregateId: 't2',
        eventType: 'Tick',
        payload: '{"seq":0}',
        headers: { 'Nats-Rollup': 'all' },
      },
      { aggregateType: 'T', aggregateId: 't3', eventType: 'Tick', payload: '{"seq":0}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual(['published', 'failed', 'published']);
    expect(st.get(ids[1]!)!.last_error).toMatch(/INVALID_MESSAGE|reserved by NATS JetStream/);
    expect((await nats.readAll('HOSTILE')).map((m) => m.headers.aggregate_id)).toEqual(['t1', 't3']);
  });

  it('a subject whose stream was deleted after the start: NO_STREAM for its events (JetStream says so), others flow', async () => {
    await nats.addStream({ name: 'GONE', subjects: ['gone.A'] });
    await nats.addStream({ name: 'STAYS', subjects: ['gone.B'] });
    await startRelay('gone', ['--ordering', 'relaxed']);
    const jsm = await (await import('@nats-io/jetstream')).jetstreamManager(await nats.admin());
    await jsm.streams.delete('GONE');
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'A', aggregateId: 'a1', eventType: 'Tick', payload: '{"seq":0}' },
      { aggregateType: 'B', aggregateId: 'b1', eventType: 'Tick', payload: '{"seq":0}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(st.get(ids[0]!)).toMatchObject({ status: 'failed' });
    expect(st.get(ids[0]!)!.last_error).toMatch(/NO_STREAM|no JetStream stream listens on gone\.A/);
    expect(st.get(ids[1]!)!.status).toBe('published');
  });

  it('preflight: no stream for the template, memory storage, a short duplicate window — each a clear error with the fix', async () => {
    const start = async (prefix: string, extra: string[] = []) => {
      const sink = new NatsSink(natsConfig(prefix, extra), silentLogger());
      try {
        await sink.start();
        return null;
      } catch (e) {
        return { cls: sink.classify(e), message: (e as Error).message };
      } finally {
        await sink.stop();
      }
    };
    const none = await start('nowhere');
    expect(none?.cls).toMatchObject({ reason: 'NO_STREAM' });
    expect(none?.message).toMatch(
      /no JetStream stream listens on nowhere\.\*.*nats stream add .*--topic-template/,
    );
    await nats.addStream({ name: 'MEM', subjects: ['mem.>'], storage: 'memory' as never });
    expect((await start('mem'))?.message).toMatch(/stream MEM has memory storage/);
    await nats.addStream({ name: 'SHORT', subjects: ['short.>'], duplicate_window: 1e9 });
    const short = await start('short');
    expect(short?.cls).toMatchObject({ reason: 'STREAM_CONFIG' });
    expect(short?.message).toMatch(/duplicate window of 1000 ms, below the relay's retry horizon of 3000 ms/);
    expect(await start('happy')).toBeNull();
  });
});

describe('NATS JetStream sink: a message over the server max_payload', () => {
  let small: ThrowawayNats;
  beforeAll(async () => {
    small = await ThrowawayNats.start({ maxPayload: 4096 });
    await small.addStream({ name: 'BIG', subjects: ['big.>'] });
  });
  afterAll(async () => {
    await small?.stop();
  });

  it('fails that event permanently; the others, of its key too in relaxed order, are published', async () => {
    const config = testConfig(db, [
      '--sink',
      'nats',
      '--nats-servers',
      small.url,
      '--topic-template',
      'big.{aggregate_type}',
      '--ordering',
      'relaxed',
      ...FAST,
    ]);
    relay = await startRelayInProcess(config, new NatsSink(config, silentLogger()));
    await waitFor(() => relay!.state === 'streaming', { timeoutMs: 60_000, message: 'relay streaming' });
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'Doc', aggregateId: 'd1', eventType: 'Tick', payload: '{"seq":0}' },
      {
        aggregateType: 'Doc',
        aggregateId: 'd1',
        eventType: 'Tick',
        payload: JSON.stringify({ seq: 1, pad: 'x'.repeat(8000) }),
      },
      { aggregateType: 'Doc', aggregateId: 'd2', eventType: 'Tick', payload: '{"seq":0}' },
      { aggregateType: 'Doc', aggregateId: 'd1', eventType: 'Tick', payload: '{"seq":2}' },
    ]);
    await settled(ids);
    const st = await statuses(ids);
    expect(ids.map((id) => st.get(id)!.status)).toEqual(['published', 'failed', 'published', 'published']);
    expect(st.get(ids[1]!)!.last_error).toMatch(/MAX_PAYLOAD|max_payload/);
    const stored = await small.readAll('BIG');
    expect(stored.map((m) => `${m.headers.aggregate_id}#${JSON.parse(m.data.toString()).seq}`)).toEqual([
      'd1#0',
      'd2#0',
      'd1#2',
    ]);
  });
});
