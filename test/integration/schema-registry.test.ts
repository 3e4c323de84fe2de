import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Config } from '../../src/config/load.ts';
import { ensureApicurioApp, java21, LocalRegistry } from '../../src/dev/local-registry.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import { SchemaRegistrySink } from '../../src/sinks/registry-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, type ReadRecord, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  insertEventsReportingCommit,
  migrateDb,
  ROOT,
  slotOf,
  slotPosition,
  spawnCli,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * --schema-registry-url against a real Schema Registry: Apicurio Registry 3 (its app from Maven
 * Central, in-memory storage, the Confluent-compatible API), started by the test
 * (src/dev/local-registry.ts), and the run's real Kafka broker.
 *
 * What the relay wrote is decoded independently of its own code, twice: the test parses the
 * Confluent framing itself (magic byte, big-endian schema id, message indexes), fetches the schema
 * by that id from the registry (GET /schemas/ids/{id}), and decodes the rest with `buf convert` —
 * buf's own Protobuf compiler and decoder (Go), given the .proto text the registry returned; and
 * a single-file Java program (test/support/java/RegistryDecode.java) does the same with
 * Apicurio's .proto parser and protobuf-java's DynamicMessage.
 *
 * The registry is reached through a TCP pass-through the test can cut: a registry outage.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
let registry: LocalRegistry;
let gate: Gate;
let relay: Relay | null = null;
let sink: SchemaRegistrySink | null = null;

/** A TCP pass-through to the registry: down() refuses and drops connections until up(). */
class Gate {
  down = false;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly port: number;
  private constructor(server: Server, port: number) {
    this.#server = server;
    this.port = port;
  }
  static async start(target: number): Promise<Gate> {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const gate = new Gate(server, (server.address() as { port: number }).port);
    server.on('connection', (c) => {
      if (gate.down) return c.destroy();
      const s = createConnection({ host: '127.0.0.1', port: target });
      for (const x of [c, s]) {
        gate.#sockets.add(x);
        x.on('close', () => gate.#sockets.delete(x));
        x.on('error', () => {
          c.destroy();
          s.destroy();
        });
      }
      c.pipe(s).pipe(c);
    });
    return gate;
  }
  cut(): void {
    this.down = true;
    for (const s of this.#sockets) s.destroy();
  }
  async stop(): Promise<void> {
    this.cut();
    await new Promise((r) => this.#server.close(r));
  }
}

beforeAll(async () => {
  [kafka, registry] = await Promise.all([
    startKafka(),
    LocalRegistry.start({ dir: join(inject('kafkaRunDir'), `registry-${process.pid}`) }),
  ]);
  gate = await Gate.start(Number(new URL(registry.url).port));
  await migrateDb(db);
  for (const t of ['Order', 'Invoice', 'Cli', 'Shipment', 'Outage', 'Bad', 'Good'])
    await kafka.createTopic(`outbox.event.${t}`, 1);
}, 300_000);

afterEach(async () => {
  await relay?.stop();
  relay = null;
  sink = null;
});

afterAll(async () => {
  await gate?.stop();
  await registry?.stop();
  await kafka?.stop();
});

function registryConfig(extra: string[] = []): Config {
  const dir = mkdtempSync(join(tmpdir(), 'registry-'));
  writeFileSync(join(dir, 'password'), 'registry-secret\n');
  return testConfig(
    db,
    [
      '--value-format',
      'envelope-protobuf',
      '--schema-registry-url',
      `http://127.0.0.1:${gate.port}/apis/ccompat/v7`,
      '--retry-max-ms',
      '1000',
      '--max-attempts',
      '0',
      '--failure-backoff-ms',
      '60000',
      ...extra,
    ],
    kafka,
  );
}

async function start(extra: string[] = []): Promise<SchemaRegistrySink> {
  const config = registryConfig(extra);
  sink = new SchemaRegistrySink(new KafkaSink(config, silentLogger()), config);
  relay = await startRelayInProcess(config, sink);
  return sink;
}

const ev = (type: string, key: string, seq: number) => ({
  aggregateType: type,
  aggregateId: key,
  eventType: 'Happened',
  payload: JSON.stringify({ seq }),
});

const statusOf = async (ids: string[]) =>
  db.query<{ status: string; last_error: string | null }>(
    'SELECT status, last_error FROM outbox_with_status WHERE id = ANY($1::bigint[]) ORDER BY id',
    [ids],
  );
const allPublished = async (ids: string[]) => (await statusOf(ids)).every((r) => r.status === 'published');

async function api<T>(path: string, init?: RequestInit): Promise<T> {
  const r = await fetch(`${registry.url}${path}`, {
    ...init,
    headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
  });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

interface Decoded {
  schemaId: number;
  indexes: number[];
  envelope: Record<string, unknown>;
}

/** Zigzag varint, as the Confluent framing writes the message indexes. */
function readZigzag(b: Buffer, at: number): [number, number] {
  let v = 0;
  let shift = 0;
  let i = at;
  for (;;) {
    const byte = b[i++]!;
    v |= (byte & 0x7f) << shift;
    if (byte < 0x80) break;
    shift += 7;
  }
  return [(v >>> 1) ^ -(v & 1), i];
}

/** The independent deserializer (see the top of the file). */
async function decode(value: Buffer): Promise<Decoded> {
  expect(value[0], 'magic byte').toBe(0);
  const schemaId = value.readUInt32BE(1);
  let [count, at] = readZigzag(value, 5);
  const indexes: number[] = [];
  if (count === 0) indexes.push(0);
  for (; count > 0; count--) {
    const [i, next] = readZigzag(value, at);
    indexes.push(i);
    at = next;
  }
  const { schema, schemaType } = await api<{ schema: string; schemaType?: string }>(
    `/schemas/ids/${schemaId}`,
  );
  expect(schemaType).toBe('PROTOBUF');
  const dir = mkdtempSync(join(tmpdir(), 'decode-'));
  writeFileSync(join(dir, 'fetched.proto'), schema);
  writeFileSync(join(dir, 'message.binpb'), value.subarray(at));
  // Message indexes [0]: the file's first message; its name comes from the fetched schema.
  const pkg = /^package\s+([\w.]+);/m.exec(schema)?.[1];
  const names = [...schema.matchAll(/^message\s+(\w+)\s*\{/gm)].map((m) => m[1]!);
  const type = `${pkg}.${names[indexes[0]!]}`;
  const r = spawnSync(
    join(ROOT, 'node_modules', '.bin', 'buf'),
    ['convert', dir, '--type', type, '--from', join(dir, 'message.binpb'), '--to', '-#format=json'],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`buf convert failed: ${r.stderr}`);
  return { schemaId, indexes, envelope: JSON.parse(r.stdout) as Record<string, unknown> };
}

async function decodedSeqs(records: ReadRecord[]) {
  const out: {
    seq: number;
    aggregateId: unknown;
    eventType: unknown;
    schemaId: number;
    indexes: number[];
  }[] = [];
  for (const r of records) {
    const d = await decode(r.value!);
    const payload = JSON.parse(Buffer.from(d.envelope.payload as string, 'base64').toString()) as {
      seq: number;
    };
    out.push({
      seq: payload.seq,
      aggregateId: d.envelope.aggregateId,
      eventType: d.envelope.eventType,
      schemaId: d.schemaId,
      indexes: d.indexes,
    });
  }
  return out;
}

const seqOf = (envelope: Record<string, unknown>) =>
  (JSON.parse(Buffer.from(envelope.payload as string, 'base64').toString()) as { seq: number }).seq;

/** test/support/java/RegistryDecode.java on each value: schema id, message type, the message as JSON. */
async function decodeInJava(values: Buffer[]) {
  const dir = mkdtempSync(join(tmpdir(), 'java-decode-'));
  const files = values.map((v, i) => {
    writeFileSync(join(dir, `${i}.bin`), v);
    return join(dir, `${i}.bin`);
  });
  const app = await ensureApicurioApp();
  const r = spawnSync(
    java21(),
    [
      '-cp',
      join(app, 'lib', 'main', '*'),
      join(ROOT, 'test/support/java/RegistryDecode.java'),
      registry.url,
      ...files,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`RegistryDecode failed: ${r.stderr}`);
  return r.stdout
    .trim()
    .split('\n')
    .map((line) => {
      const [id, type, json] = line.split('\t');
      return { schemaId: Number(id), type, message: JSON.parse(json!) as Record<string, unknown> };
    });
}

async function subjectId(subject: string): Promise<number> {
  return (await api<{ id: number }>(`/subjects/${encodeURIComponent(subject)}/versions/latest`)).id;
}

describe('Schema Registry (Apicurio, Confluent-compatible API)', () => {
  it('TopicNameStrategy: <topic>-value registered once per topic, values framed, decoded with the schema fetched by id', async () => {
    const s = await start();
    const ids = await insertEvents(db.pool, [
      ev('Order', 'o1', 0),
      ev('Invoice', 'i1', 0),
      ev('Order', 'o1', 1),
    ]);
    await waitFor(() => allPublished(ids), { timeoutMs: 60_000, message: 'published' });
    // At least one request per subject (more if the cold registry was slow to answer the first).
    const asked = s.registryRequests;
    expect(asked).toBeGreaterThanOrEqual(2);
    const more = await insertEvents(db.pool, [ev('Order', 'o1', 2), ev('Invoice', 'i1', 1)]);
    await waitFor(() => allPublished(more), { timeoutMs: 60_000, message: 'published' });
    expect(s.registryRequests, 'the ids are cached per subject: no request for known subjects').toBe(asked);
    const orderId = await subjectId(kafka.topic('outbox.event.Order-value'));
    const invoiceId = await subjectId(kafka.topic('outbox.event.Invoice-value'));
    const orders = await decodedSeqs(await kafka.readAll('outbox.event.Order'));
    expect(orders).toEqual(
      [0, 1, 2].map((seq) => ({
        seq,
        aggregateId: 'o1',
        eventType: 'Happened',
        schemaId: orderId,
        indexes: [0],
      })),
    );
    const invoices = await decodedSeqs(await kafka.readAll('outbox.event.Invoice'));
    expect(invoices.map((d) => [d.seq, d.schemaId])).toEqual([
      [0, invoiceId],
      [1, invoiceId],
    ]);
    // A second, Java deserializer: Apicurio's own .proto parser and protobuf-java's DynamicMessage.
    const records = [
      ...(await kafka.readAll('outbox.event.Order')),
      ...(await kafka.readAll('outbox.event.Invoice')),
    ];
    const java = await decodeInJava(records.map((r) => r.value!));
    expect(java.map((j) => [j.schemaId, j.type, j.message.aggregateId, seqOf(j.message)])).toEqual([
      [orderId, 'outbox.v1.Envelope', 'o1', 0],
      [orderId, 'outbox.v1.Envelope', 'o1', 1],
      [orderId, 'outbox.v1.Envelope', 'o1', 2],
      [invoiceId, 'outbox.v1.Envelope', 'i1', 0],
      [invoiceId, 'outbox.v1.Envelope', 'i1', 1],
    ]);
  });

  it('`outbox-relay run` (the CLI, under plain Node): framed and registered the same way', async () => {
    const cli = spawnCli([
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      ...kafka.relayArgs(),
      '--value-format',
      'envelope-protobuf',
      '--schema-registry-url',
      registry.url,
    ]);
    try {
      const ids = await insertEvents(db.pool, [ev('Cli', 'c1', 0)]);
      await waitFor(() => allPublished(ids), {
        timeoutMs: 90_000,
        message: () => `published by the CLI; its logs:\n${cli.logs().slice(-3000)}`,
      });
    } finally {
      cli.kill();
      await cli.exited;
    }
    const id = await subjectId(kafka.topic('outbox.event.Cli-value'));
    expect(await decodedSeqs(await kafka.readAll('outbox.event.Cli'))).toEqual([
      { seq: 0, aggregateId: 'c1', eventType: 'Happened', schemaId: id, indexes: [0] },
    ]);
  });

  it('RecordNameStrategy: one subject, outbox.v1.Envelope, for every topic', async () => {
    await start(['--schema-registry-subject-strategy', 'record-name']);
    const ids = await insertEvents(db.pool, [ev('Shipment', 's1', 0)]);
    await waitFor(() => allPublished(ids), { timeoutMs: 60_000, message: 'published' });
    const recordId = await subjectId('outbox.v1.Envelope');
    const shipments = await decodedSeqs(await kafka.readAll('outbox.event.Shipment'));
    expect(shipments).toEqual([
      { seq: 0, aggregateId: 's1', eventType: 'Happened', schemaId: recordId, indexes: [0] },
    ]);
  });

  it('a registry outage is transient: nothing failed, the slot not confirmed past the events; published once it is back', async () => {
    await start();
    gate.cut();
    const { ids, commitLsn } = await insertEventsReportingCommit(db, [
      ev('Outage', 'x', 0),
      ev('Outage', 'x', 1),
    ]);
    await waitFor(async () => (await relay!.metrics.brokerOutage.get()).values[0]?.value === 1, {
      timeoutMs: 60_000,
      message: 'the registry outage is reported as an outage',
    });
    const reasons = (await relay!.metrics.transientErrors.get()).values.map((v) => v.labels.reason);
    expect(reasons).toContain('REGISTRY_UNAVAILABLE');
    expect((await statusOf(ids)).map((r) => r.status)).toEqual(['pending', 'pending']);
    const { confirmed } = await slotPosition(db);
    const notPast = await db.query<{ ok: boolean }>('SELECT $1::pg_lsn <= $2::pg_lsn AS ok', [
      confirmed,
      commitLsn,
    ]);
    expect(notPast[0]!.ok, `slot confirmed ${confirmed} past the unpublished commit ${commitLsn}`).toBe(true);
    expect(await kafka.readAll('outbox.event.Outage')).toEqual([]);
    gate.down = false;
    await waitFor(() => allPublished(ids), {
      timeoutMs: 60_000,
      message: 'published once the registry is back',
    });
    expect((await decodedSeqs(await kafka.readAll('outbox.event.Outage'))).map((d) => d.seq)).toEqual([0, 1]);
  });

  it("an incompatible schema (409) fails that topic's events, clearly; the other topic's flow", async () => {
    const subject = kafka.topic('outbox.event.Bad-value');
    await api(`/subjects/${encodeURIComponent(subject)}/versions`, {
      method: 'POST',
      body: JSON.stringify({
        schemaType: 'PROTOBUF',
        schema: 'syntax = "proto3";\npackage outbox.v1;\nmessage Envelope { int64 event_id = 1; }\n',
      }),
    });
    await api(`/config/${encodeURIComponent(subject)}`, {
      method: 'PUT',
      body: JSON.stringify({ compatibility: 'BACKWARD' }),
    });
    await start();
    const ids = await insertEvents(db.pool, [ev('Bad', 'b', 0), ev('Good', 'g', 0), ev('Bad', 'b', 1)]);
    await waitFor(async () => (await statusOf(ids)).every((r) => r.status !== 'pending'), {
      timeoutMs: 60_000,
      message: 'every event settled',
    });
    const [bad0, good, bad1] = await statusOf(ids);
    expect(good!.status).toBe('published');
    for (const b of [bad0!, bad1!]) {
      expect(b.status).toMatch(/failed|parked/);
    }
    expect(bad0!.status).toBe('failed');
    expect(bad0!.last_error).toMatch(/permanent\/SCHEMA_INCOMPATIBLE/);
    expect(bad0!.last_error).toMatch(/incompatible with the subject's history .*409/);
    expect(await kafka.readAll('outbox.event.Bad')).toEqual([]);
    expect((await decodedSeqs(await kafka.readAll('outbox.event.Good'))).map((d) => d.seq)).toEqual([0]);
  });
});
