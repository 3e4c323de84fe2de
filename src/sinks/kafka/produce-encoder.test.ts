import { createRequire } from 'node:module';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { crc32c } from './crc32c.ts';
import { CODEC_NAMES, loadCodec, registerKafkajsCodecs } from './kafka-codecs.ts';
import { installProduceEncoder } from './kafkajs/produce-hook.ts';
import { encodeProduceBody, type ProduceArgs, type ProduceMessage } from './produce-encoder.ts';

const require = createRequire(import.meta.url);
type Build = (args: unknown) => {
  request: { apiVersion: number; encode: () => Promise<{ buffer: Buffer }> };
};
const produce = require('kafkajs/src/protocol/requests/produce/index.js') as {
  protocol: (o: { version: number }) => Build;
};
const Long = require('kafkajs/src/utils/long.js') as { fromValue(v: unknown): unknown };
// kafkajs' own encoder, taken before the hook is installed.
const kafkajsProtocol = produce.protocol;

let seed = 7;
function rnd(n: number): number {
  seed = (seed * 1103515245 + 12345) >>> 0;
  return (seed >>> 8) % n;
}
const ALPHABET = ['a', 'Z', '9', '-', '.', 'é', '€', '😀', '中', ' '];
function text(max: number): string {
  let s = '';
  for (let i = rnd(max + 1); i > 0; i--) s += ALPHABET[rnd(ALPHABET.length)];
  return s;
}
function bytes(max: number): Buffer {
  const b = Buffer.alloc(rnd(max + 1));
  for (let i = 0; i < b.length; i++) b[i] = rnd(256);
  return b;
}

function message(now: number, small: boolean): ProduceMessage {
  const key = [null, undefined, text(40), bytes(20)][rnd(4)];
  const value = [null, bytes(600), text(200), bytes(3)][rnd(4)];
  let headers: Record<string, string | Buffer> | undefined;
  if (rnd(5) > 0) {
    headers = {};
    for (let i = rnd(8); i > 0; i--) headers[text(12)] = rnd(3) ? text(40) : bytes(10);
  }
  // Small numbers (1 to 5 digits) sort differently as strings, as kafkajs sorts them; not mixed
  // with the others, whose deltas to them would not fit the record's int32.
  const ts = small
    ? 1 + rnd(100_000)
    : [String(now - rnd(100_000)), now + rnd(5000), undefined, String(now)][rnd(4)];
  return { key, value, headers, timestamp: ts };
}

function args(now: number): ProduceArgs & { compression: number } {
  const small = rnd(4) === 0;
  return {
    acks: [-1, 1, 0][rnd(3)]!,
    timeout: rnd(60_000),
    compression: 0,
    transactionalId: rnd(4) ? null : text(10),
    producerId: rnd(2) ? (Long.fromValue(rnd(1_000_000)) as { value: bigint }) : rnd(1000),
    producerEpoch: rnd(5),
    topicData: Array.from({ length: 1 + rnd(3) }, () => ({
      topic: `outbox.event.${text(10)}`,
      partitions: Array.from({ length: 1 + rnd(3) }, (_, p) => ({
        partition: p,
        firstSequence: rnd(1_000_000),
        messages: Array.from({ length: 1 + rnd(60) }, () => message(now, small)),
      })),
    })),
  };
}

async function kafkajsBytes(version: number, a: unknown): Promise<Buffer> {
  return Buffer.from((await kafkajsProtocol({ version })(a).request.encode()).buffer);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('encodeProduceBody', () => {
  it('writes the bytes kafkajs writes, for random requests (keys, values, headers, timestamps, ids)', async () => {
    const now = 1_763_000_000_000;
    vi.spyOn(Date, 'now').mockReturnValue(now);
    for (let n = 0; n < 200; n++) {
      const a = args(now);
      const ours = encodeProduceBody(a, now);
      expect(ours).not.toBeNull();
      expect(ours!.equals(await kafkajsBytes(3, a))).toBe(true);
    }
  });

  it('writes the bytes kafkajs writes when records repeat header names and values (same or equal strings, in the same or other places)', async () => {
    const now = 1_763_000_000_000;
    vi.spyOn(Date, 'now').mockReturnValue(now);
    const pick = <T>(xs: T[]) => xs[rnd(xs.length)]!;
    // A few strings, each also as a second, equal string object; non-ASCII ones among them.
    const names = ['id', 'event_type', 'é-type', 'content-type', '😀'];
    const values = ['BenchEvent', 'Bulk', 'application/json', 'Ünïcode €', '', 'x'.repeat(80)];
    const twin = (s: string) => (rnd(2) ? s : Buffer.from(s).toString());
    for (let n = 0; n < 100; n++) {
      const a = args(now);
      for (const t of a.topicData)
        for (const p of t.partitions)
          for (const m of p.messages) {
            const headers: Record<string, string | Buffer> = {};
            for (let i = rnd(6); i > 0; i--)
              headers[twin(pick(names))] = rnd(8) ? twin(pick(values)) : bytes(5);
            m.headers = headers;
          }
      const ours = encodeProduceBody(a, now);
      expect(ours!.equals(await kafkajsBytes(3, a))).toBe(true);
    }
  });

  it('declines what it does not encode (arrays as header values, Uint8Array values, odd timestamps)', () => {
    const base = (m: ProduceMessage): ProduceArgs => ({
      acks: -1,
      timeout: 1000,
      producerId: 1,
      producerEpoch: 0,
      topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [m] }] }],
    });
    expect(encodeProduceBody(base({ key: 'k', value: 'v', headers: { a: ['1', '2'] } }))).toBeNull();
    expect(encodeProduceBody(base({ key: 'k', value: new Uint8Array([1]) }))).toBeNull();
    expect(encodeProduceBody(base({ key: 5, value: 'v' }))).toBeNull();
    expect(encodeProduceBody(base({ key: 'k', value: 'v', headers: null }))).toBeNull();
    const inherited = Object.assign(Object.create({ proto: 'x' }), { own: 'y' });
    expect(encodeProduceBody(base({ key: 'k', value: 'v', headers: inherited }))).toBeNull();
    expect(encodeProduceBody(base({ key: 'k', value: 'v', headers: { n: 5 } }))).toBeNull();
    expect(encodeProduceBody(base({ key: 'k', value: 'v', timestamp: '1.5' }))).toBeNull();
    expect(encodeProduceBody(base({ key: 'k', value: 'v', timestamp: '1' }))).not.toBeNull();
  });
});

/** Each partition's record batch of a Produce body (v3–v7): attributes, CRC check, records section. */
function batchesOf(body: Buffer): { attributes: number; crcOk: boolean; count: number; records: Buffer }[] {
  let o = 0;
  const str = () => {
    const n = body.readInt16BE(o);
    o += 2 + Math.max(n, 0);
  };
  str(); // transactional id
  o += 2 + 4; // acks, timeout
  const out = [];
  for (let t = body.readInt32BE(o), _ = (o += 4); t > 0; t--) {
    str();
    for (let p = body.readInt32BE(o), _ = (o += 4); p > 0; p--) {
      o += 4; // partition
      const size = body.readInt32BE(o);
      const start = o + 4;
      const end = start + size;
      const crcAt = start + 8 + 4 + 4 + 1;
      const attributesAt = crcAt + 4;
      const countAt = attributesAt + 2 + 4 + 8 + 8 + 8 + 2 + 4;
      out.push({
        attributes: body.readInt16BE(attributesAt),
        crcOk: body.readUInt32BE(crcAt) === crc32c(body, attributesAt, end),
        count: body.readInt32BE(countAt),
        records: body.subarray(countAt + 4, end),
      });
      o = end;
    }
  }
  expect(o).toBe(body.length);
  return out;
}

describe('encodeProduceBody: null header values', () => {
  it("writes a null header value as Kafka's null (length -1), which kafkajs' decoder reads back as null", () => {
    const body = (headers: Record<string, string | Buffer | null>) =>
      encodeProduceBody({
        acks: -1,
        timeout: 1000,
        producerId: 1,
        producerEpoch: 0,
        topicData: [
          {
            topic: 't',
            partitions: [{ partition: 0, messages: [{ key: 'k', value: 'v', headers, timestamp: 5 }] }],
          },
        ],
      } as ProduceArgs)!;
    const withNull = body({ id: 'e-1', trace: null });
    const withEmpty = body({ id: 'e-1', trace: '' });
    const [n] = batchesOf(withNull);
    const [e] = batchesOf(withEmpty);
    expect(n!.crcOk).toBe(true);
    // The only difference in the record: the value length, zigzag -1 (0x01) against 0 (0x00).
    expect(n!.records.length).toBe(e!.records.length);
    const diff = [...n!.records].flatMap((b, i) => (b === e!.records[i] ? [] : [[b, e!.records[i]]]));
    expect(diff).toEqual([[0x01, 0x00]]);
    const Decoder = require('kafkajs/src/protocol/decoder');
    const decodeRecord = require('kafkajs/src/protocol/recordBatch/record/v0/decoder');
    const d = new Decoder(n!.records);
    const length = d.readVarInt();
    const record = decodeRecord(d.slice(length), { firstOffset: '0', firstTimestamp: '5' });
    expect(record.headers.id.toString()).toBe('e-1');
    expect(record.headers.trace).toBeNull();
  });
});

describe('encodeProduceBody with a codec', () => {
  registerKafkajsCodecs();
  for (const name of CODEC_NAMES) {
    it(`${name}: the records section decompresses to the uncompressed encoding's, codec bits and CRC set; kafkajs writes the same bytes`, async () => {
      const codec = await loadCodec(name);
      const now = 1_763_000_000_000;
      vi.spyOn(Date, 'now').mockReturnValue(now);
      for (let n = 0; n < 30; n++) {
        const a = { ...args(now), compression: codec.id };
        const plain = batchesOf(encodeProduceBody(a, now)!);
        const body = encodeProduceBody(a, now, 0, codec)!;
        const packed = batchesOf(body);
        expect(packed.length).toBe(plain.length);
        for (let i = 0; i < packed.length; i++) {
          expect(packed[i]!.attributes & 7).toBe(codec.id);
          expect(packed[i]!.attributes & ~7).toBe(plain[i]!.attributes);
          expect(packed[i]!.crcOk).toBe(true);
          expect(packed[i]!.count).toBe(plain[i]!.count);
          expect(codec.decompress(packed[i]!.records).equals(plain[i]!.records)).toBe(true);
        }
        // kafkajs' own encoder with the codec (its gzip; the relay's codecs registered for the others).
        expect(body.equals(await kafkajsBytes(3, a))).toBe(true);
      }
    });
  }

  it('snappy: reads the xerial framing in several blocks and a raw snappy block', async () => {
    const { compressSync } = await import('snappy');
    const snappy = await loadCodec('snappy');
    const big = Buffer.alloc(100_000, 'outbox ');
    const framed = snappy.compress(big);
    expect(framed.subarray(0, 8).toString('latin1')).toBe('\x82SNAPPY\0');
    expect(framed.readInt32BE(8)).toBe(1);
    expect(snappy.decompress(framed).equals(big)).toBe(true);
    expect(snappy.decompress(compressSync(big)).equals(big)).toBe(true);
  });

  it('lz4: a standard frame with a correct header checksum (KIP-57)', async () => {
    const frame = (await loadCodec('lz4')).compress(Buffer.from('a record batch'));
    expect(frame.readUInt32LE(0)).toBe(0x184d2204);
    expect(frame[4]! >> 6).toBe(1); // frame version 01
  });
});

describe('installProduceEncoder', () => {
  it('plugs into kafkajs: every record-batch version (3–7) encodes as kafkajs did, fallbacks included', async () => {
    expect(installProduceEncoder()).toBe(true);
    expect(installProduceEncoder()).toBe(true); // once per process
    expect(produce.protocol).not.toBe(kafkajsProtocol);
    const now = 1_763_000_000_000;
    vi.spyOn(Date, 'now').mockReturnValue(now);
    for (const version of [3, 4, 5, 6, 7]) {
      for (let n = 0; n < 20; n++) {
        const a = args(now);
        const built = produce.protocol({ version })(a);
        expect(built.request.apiVersion).toBe(version);
        const hooked = Buffer.from((await built.request.encode()).buffer);
        expect(hooked.equals(await kafkajsBytes(version, a))).toBe(true);
      }
    }
    // Declined by the fast encoder: kafkajs' own encoding, unchanged.
    const odd = args(now);
    odd.topicData[0]!.partitions[0]!.messages[0]!.headers = { multi: ['1', '2'] };
    const hooked = Buffer.from((await produce.protocol({ version: 7 })(odd).request.encode()).buffer);
    expect(hooked.equals(await kafkajsBytes(7, odd))).toBe(true);
    // Compressed: the relay's encoder with the codec, the bytes kafkajs writes.
    registerKafkajsCodecs();
    for (const name of CODEC_NAMES) {
      const c = { ...args(now), compression: (await loadCodec(name)).id };
      const cBuilt = produce.protocol({ version: 7 })(c);
      expect(Buffer.from((await cBuilt.request.encode()).buffer).equals(await kafkajsBytes(7, c))).toBe(true);
    }
  });

  it("frames a request as kafkajs' request.js does, without copying the body (short and long client ids)", async () => {
    expect(installProduceEncoder()).toBe(true);
    const createRequest = require('kafkajs/src/protocol/request.js') as (o: {
      correlationId: number;
      clientId: string;
      request: { apiKey: number; apiVersion: number; encode: () => Promise<unknown> };
    }) => Promise<{ buffer: Buffer; buf: Buffer }>;
    const now = 1_763_000_000_000;
    vi.spyOn(Date, 'now').mockReturnValue(now);
    for (const clientId of ['pg-outbox-relay', 'x'.repeat(49), 'y'.repeat(51), 'é'.repeat(30)]) {
      for (let n = 0; n < 10; n++) {
        const a = args(now);
        const built = produce.protocol({ version: 7 })(a);
        let ours: Buffer | undefined;
        const encode = async () => {
          const e = (await built.request.encode()) as unknown as { buf: Buffer };
          ours = e.buf;
          return e;
        };
        const framed = await createRequest({
          correlationId: 42 + n,
          clientId,
          request: { apiKey: 0, apiVersion: 7, encode },
        });
        // The same request framed around kafkajs' own body.
        const body = await kafkajsBytes(7, a);
        const expected = await createRequest({
          correlationId: 42 + n,
          clientId,
          request: {
            apiKey: 0,
            apiVersion: 7,
            encode: async () => ({ buf: body, offset: body.length, buffer: body }),
          },
        });
        expect(framed.buffer.equals(expected.buffer)).toBe(true);
        // A short client id fits the room in front of the body: the framed request is written
        // around the body, in its buffer; a long one is framed by kafkajs' copies.
        const fits = 14 + Buffer.byteLength(clientId) <= 64;
        expect(framed.buf.buffer === ours!.buffer).toBe(fits);
        if (fits) expect(framed.buf.byteOffset + framed.buffer.length).toBe(ours!.byteOffset + ours!.length);
      }
    }
  });
});
