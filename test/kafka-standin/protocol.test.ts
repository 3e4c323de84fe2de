import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Reader, Writer } from './codec.ts';
import { KafkaErrorCode, KafkaStandIn } from './index.ts';
import { BATCH, Compression, decodeBatch, readBatchHeader } from './record-batch.ts';
import { encodeBatch, produceBody, rawRequest, readProduceResponse, until } from './test-helpers.ts';

let broker: KafkaStandIn;

beforeAll(async () => {
  broker = await KafkaStandIn.start();
  broker.createTopic('p.topic', { partitions: 2 });
});

afterAll(async () => {
  await broker.stop();
});

function fetchBody(
  topic: string,
  partition: number,
  offset: number,
  o: { maxWait?: number; partMax?: number } = {},
) {
  return (w: Writer) => {
    w.int32(-1)
      .int32(o.maxWait ?? 0)
      .int32(1)
      .int32(50 * 1024 * 1024)
      .int8(1)
      .int32(0)
      .int32(-1);
    w.int32(1).string(topic).int32(1);
    w.int32(partition)
      .int32(-1)
      .int64(offset)
      .int64(-1)
      .int32(o.partMax ?? 1024 * 1024);
    w.int32(0).string('');
  };
}

function readFetch(r: Reader) {
  r.int32(); // throttle
  const topError = r.int16();
  r.int32(); // session id
  r.int32(); // topics
  r.string();
  r.int32(); // partitions
  r.int32();
  const errorCode = r.int16();
  const highWatermark = r.int64();
  r.int64(); // last stable offset
  r.int64(); // log start offset
  r.array(() => null);
  r.int32(); // preferred read replica
  const records = r.bytes();
  const batches: Buffer[] = [];
  for (let at = 0; at < records.length; ) {
    const size = readBatchHeader(records, at).sizeInBytes;
    batches.push(records.subarray(at, at + size));
    at += size;
  }
  return { topError, errorCode, highWatermark, batches };
}

async function produce(partition: number, ...values: string[]) {
  const batch = await encodeBatch({ messages: values.map((value) => ({ key: null, value })) });
  return readProduceResponse(await rawRequest(broker, 0, 7, produceBody('p.topic', partition, batch)));
}

describe('wire protocol', () => {
  it('advertises exactly one version per implemented API, and ApiVersions v0-v2', async () => {
    const r = await rawRequest(broker, 18, 2, () => {});
    expect(r.int16()).toBe(0);
    const apis = r.array((a) => [a.int16(), a.int16(), a.int16()]);
    expect(r.int32()).toBe(0); // throttle_time_ms
    expect(r.remaining()).toBe(0);
    expect(apis).toEqual([
      [0, 7, 7],
      [1, 11, 11],
      [2, 3, 3],
      [3, 6, 6],
      [8, 5, 5],
      [9, 4, 4],
      [10, 2, 2],
      [11, 5, 5],
      [12, 3, 3],
      [13, 3, 3],
      [14, 3, 3],
      [18, 0, 2],
      [19, 3, 3],
      [20, 1, 1],
      [22, 1, 1],
    ]);
    // A newer ApiVersions than we know: UNSUPPORTED_VERSION in the v0 layout, so clients can downgrade.
    const newer = await rawRequest(broker, 18, 3, () => {});
    expect(newer.int16()).toBe(KafkaErrorCode.UNSUPPORTED_VERSION);
    expect(newer.array((a) => [a.int16(), a.int16(), a.int16()])).toEqual(apis);
  });

  it('closes connections on unsupported versions and malformed frames, and keeps serving others', async () => {
    const before = broker.stats().protocolErrors;
    await expect(rawRequest(broker, 0, 3, produceBody('p.topic', 0, Buffer.alloc(0)))).rejects.toThrow(
      'connection closed before a response arrived',
    );
    await expect(rawRequest(broker, 3, 6, (w) => w.int32(5))).rejects.toThrow('connection closed');
    const socket = net.connect(broker.port, '127.0.0.1');
    socket.on('error', () => {});
    socket.write(Buffer.from([0xff, 0xff, 0xff, 0xfb]));
    await new Promise((resolve) => socket.on('close', resolve));
    expect(broker.stats().protocolErrors - before).toBe(3);
    expect(broker.stats().internalErrors).toBe(0);
    expect(await produce(0, 'still-alive')).toMatchObject({ errorCode: 0 });
  });

  it('validates batches: CRC, one batch per partition, unknown partitions', async () => {
    const good = await encodeBatch({ messages: [{ value: 'v' }] });
    const corrupt = Buffer.from(good);
    corrupt[corrupt.length - 2]! ^= 0xff;
    const send = async (partition: number, records: Buffer) =>
      readProduceResponse(await rawRequest(broker, 0, 7, produceBody('p.topic', partition, records)));
    expect(await send(1, corrupt)).toEqual({ errorCode: KafkaErrorCode.CORRUPT_MESSAGE, baseOffset: -1 });
    expect(await send(1, Buffer.concat([good, good]))).toEqual({
      errorCode: KafkaErrorCode.INVALID_RECORD,
      baseOffset: -1,
    });
    expect(await send(7, good)).toEqual({
      errorCode: KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
      baseOffset: -1,
    });
    expect(broker.count('p.topic')).toBe(broker.records('p.topic').length);
    expect(broker.records('p.topic').filter((r) => r.partition === 1)).toEqual([]);
  });

  it('closes the connection when an acks=0 produce fails, since there is no response to carry the error', async () => {
    const good = await encodeBatch({ messages: [{ value: 'v' }] });
    await expect(rawRequest(broker, 0, 7, produceBody('p.topic', 9, good, 0))).rejects.toThrow(
      'connection closed before a response arrived',
    );
  });

  it('long-polls Fetch until data arrives or max_wait_ms passes, returning whole batches', async () => {
    await produce(1, 'a', 'b', 'c');
    await produce(1, 'd');
    // Mid-batch fetch offset: the whole containing batch comes back, with broker-assigned offsets.
    const mid = readFetch(await rawRequest(broker, 1, 11, fetchBody('p.topic', 1, 1)));
    expect(mid.errorCode).toBe(0);
    expect(mid.highWatermark).toBe(4);
    expect(mid.batches.flatMap((b) => decodeBatch(b).map((r) => [r.offset, r.value!.toString()]))).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'c'],
      [3, 'd'],
    ]);
    // KIP-74: a partition limit below the first batch's size still returns that batch.
    const tiny = readFetch(await rawRequest(broker, 1, 11, fetchBody('p.topic', 1, 0, { partMax: 1 })));
    expect(tiny.batches).toHaveLength(1);
    expect(readBatchHeader(tiny.batches[0]!).recordCount).toBe(3);

    let t = performance.now();
    const idle = readFetch(await rawRequest(broker, 1, 11, fetchBody('p.topic', 1, 4, { maxWait: 300 })));
    expect(performance.now() - t).toBeGreaterThanOrEqual(290);
    expect(idle).toMatchObject({ errorCode: 0, highWatermark: 4, batches: [] });

    t = performance.now();
    const waiting = rawRequest(broker, 1, 11, fetchBody('p.topic', 1, 4, { maxWait: 10_000 }));
    await new Promise((r) => setTimeout(r, 100));
    await produce(1, 'late');
    const woken = readFetch(await waiting);
    expect(performance.now() - t).toBeLessThan(5_000);
    expect(woken.batches.flatMap((b) => decodeBatch(b).map((r) => r.value!.toString()))).toEqual(['late']);

    const beyond = readFetch(await rawRequest(broker, 1, 11, fetchBody('p.topic', 1, 99)));
    expect(beyond.errorCode).toBe(KafkaErrorCode.OFFSET_OUT_OF_RANGE);
    const unknown = readFetch(await rawRequest(broker, 1, 11, fetchBody('p.nope', 0, 0)));
    expect(unknown.errorCode).toBe(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  });

  it('ends a pending long-poll when the broker goes down', async () => {
    const local = await KafkaStandIn.start();
    local.createTopic('lp');
    const pending = rawRequest(local, 1, 11, fetchBody('lp', 0, 0, { maxWait: 30_000 }));
    await until(() => local.stats().fetchRequests === 1, 'the fetch to arrive');
    const t = performance.now();
    await local.down();
    await expect(pending).rejects.toThrow('connection closed before a response arrived');
    await local.stop();
    expect(performance.now() - t).toBeLessThan(2_000);
  });
});

describe('record batch decoding', () => {
  it('decodes gzip batches with headers, null keys and values, and timestamps', async () => {
    const ts = 1_700_000_000_000;
    const bytes = await encodeBatch({
      compression: Compression.GZIP,
      timestamp: ts,
      producerId: 5,
      firstSequence: 0,
      messages: [
        { key: 'k1', value: 'v1', headers: { a: '1', b: '2' } },
        { key: null, value: null },
        { key: 'k3', value: Buffer.from([0, 255]) },
      ],
    });
    const header = readBatchHeader(bytes);
    expect(header).toMatchObject({ compression: Compression.GZIP, recordCount: 3, producerId: 5, magic: 2 });
    bytes.writeInt32BE(0, BATCH.BASE_OFFSET);
    bytes.writeUInt32BE(40, BATCH.BASE_OFFSET + 4);
    const records = decodeBatch(bytes);
    expect(
      records.map((r) => ({ ...r, headers: r.headers.map((h) => [h.key, h.value?.toString()]) })),
    ).toEqual([
      {
        offset: 40,
        timestamp: ts,
        key: Buffer.from('k1'),
        value: Buffer.from('v1'),
        headers: [
          ['a', '1'],
          ['b', '2'],
        ],
      },
      { offset: 41, timestamp: ts + 1, key: null, value: null, headers: [] },
      { offset: 42, timestamp: ts + 2, key: Buffer.from('k3'), value: Buffer.from([0, 255]), headers: [] },
    ]);
  });

  it('round-trips zig-zag varints and int64 fields', () => {
    const values = [0, -1, 1, 63, -64, 64, 300, -300, 2 ** 31 - 1, -(2 ** 31), 2 ** 40, -(2 ** 40)];
    const w = new Writer();
    for (const v of values) {
      const zz = v >= 0 ? v * 2 : -v * 2 - 1;
      let u = zz;
      const bytes: number[] = [];
      do {
        let b = u % 128;
        u = Math.floor(u / 128);
        if (u > 0) b |= 0x80;
        bytes.push(b);
      } while (u > 0);
      w.raw(Buffer.from(bytes)).int64(v);
    }
    const r = new Reader(w.toBuffer());
    for (const v of values) {
      expect(r.varint()).toBe(v);
      expect(r.int64()).toBe(v);
    }
    expect(r.remaining()).toBe(0);
    expect(() => r.int8()).toThrow('truncated input');
  });
});
