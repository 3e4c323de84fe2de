import { createRequire } from 'node:module';
import { codecById } from '../kafka-codecs.ts';
import { encodeProduceBody, type ProduceArgs } from '../produce-encoder.ts';

/**
 * Plugs src/sinks/kafka/produce-encoder.ts into kafkajs. kafkajs has no hook for its wire encoding, so
 * this wraps the one mutable entry point every Produce request goes through: the `protocol`
 * function of kafkajs' Produce request definition (src/protocol/requests/produce/index.js),
 * which each broker calls per request to pick the versioned request builder. The wrapper
 * keeps kafkajs' request object (api key, version, response parser) and replaces only its
 * `encode` — for versions 3 to 7 (record batches, magic 2), uncompressed or compressed by a codec
 * of src/sinks/kafka/kafka-codecs.ts; everything else, and any message the fast encoder does not
 * take, goes through kafkajs' own `encode`.
 *
 * Robustness: the entry point is looked up by path in the kafkajs that `import 'kafkajs'`
 * resolves to; when its shape is not the expected one (another kafkajs version), nothing is
 * installed and kafkajs encodes as before (installProduceEncoder returns false and the sink
 * says so in its log). Tests compare both encoders byte for byte and run the real-Kafka suite
 * through the hook.
 */

const FAST = Symbol.for('pg-outbox-relay.fastProduceEncoder');
const NONE = 0; // kafkajs CompressionTypes.None

interface KafkajsEncoder {
  buf: Buffer;
  offset: number;
}

interface ProduceDefinition {
  versions: string[];
  protocol: ((opts: { version: number }) => unknown) & { [FAST]?: true };
}

type RequestBuilder = (args: ProduceArgs & { compression?: number }) => {
  request: { apiVersion: number; encode: () => Promise<KafkajsEncoder> };
  response: unknown;
};

const require = createRequire(import.meta.url);

let installed = false;
let requestsBuilt = 0;

/**
 * How many Produce requests kafkajs has built in this process (null when the hook is not
 * installed). A send that failed without building one failed before anything reached a broker
 * (e.g. in its metadata request): no partition can have been stored.
 */
export function produceRequestsBuilt(): number | null {
  return installed ? requestsBuilt : null;
}

/** Installs the fast encoder once per process; false when this kafkajs does not look as expected. */
export function installProduceEncoder(): boolean {
  let produce: ProduceDefinition;
  let Encoder: new (size?: number) => KafkajsEncoder;
  try {
    produce = require('kafkajs/src/protocol/requests/produce/index.js');
    Encoder = require('kafkajs/src/protocol/encoder.js');
  } catch {
    return false;
  }
  if (typeof produce?.protocol !== 'function' || typeof Encoder !== 'function') return false;
  if (produce.protocol[FAST]) return (installed = true);
  const original = produce.protocol;
  const builders = versionBuilders(Array.isArray(produce.versions) ? produce.versions : []);
  const wrapped = ((opts: { version: number }) => {
    const version = Number(opts.version);
    const build = (builders.get(version) ?? original(opts)) as RequestBuilder | undefined;
    if (typeof build !== 'function') return build;
    return (args: Parameters<RequestBuilder>[0]) => {
      requestsBuilt++;
      const built = build(args);
      if (version < 3 || version > 7) return built;
      const kafkajsEncode = built.request.encode;
      const compression = args.compression ?? NONE;
      const codec = compression === NONE ? undefined : codecById(compression);
      if ((compression !== NONE && !codec) || typeof kafkajsEncode !== 'function') return built;
      built.request.encode = async () => {
        const body = encodeProduceBody(args, Date.now(), FRAMING_ROOM, codec);
        if (!body) return kafkajsEncode();
        // kafkajs' request framing copies from an Encoder (`buf`, `offset`); a 1-byte one, then
        // ours, which carries the room in front of the body for the framing (see adoptInto).
        const e = new Encoder(1);
        e.buf = body;
        e.offset = body.length;
        (e as KafkajsEncoder & Framable)[ROOM] = FRAMING_ROOM;
        return e;
      };
      return built;
    };
  }) as ProduceDefinition['protocol'];
  wrapped[FAST] = true;
  produce.protocol = wrapped;
  framingWithoutCopies(Encoder);
  installed = true;
  return true;
}

/**
 * kafkajs' Produce builders for versions 3 to 7, with their request and response modules required
 * once. kafkajs' own builder of a version requires both modules each time it is called — two
 * `require` calls per Produce request, each a path resolution through Node's module cache: 1.5 %
 * of the relay's busy time in live mode, where every commit is a request of its own
 * (docs/benchmarks.md, "Live mode: where the CPU per commit went"). The same calls with the same
 * arguments otherwise (src/protocol/requests/produce/index.js). A version whose modules are not
 * found keeps kafkajs'.
 */
function versionBuilders(versions: string[]): Map<number, RequestBuilder> {
  const builders = new Map<number, RequestBuilder>();
  for (const v of versions.map(Number)) {
    if (v < 3 || v > 7) continue;
    let request: (args: object) => ReturnType<RequestBuilder>['request'];
    let response: unknown;
    try {
      request = require(`kafkajs/src/protocol/requests/produce/v${v}/request.js`);
      response = require(`kafkajs/src/protocol/requests/produce/v${v}/response.js`);
    } catch {
      continue;
    }
    if (typeof request !== 'function') continue;
    builders.set(
      v,
      ({ acks, timeout, compression, topicData, transactionalId, producerId, producerEpoch }) => ({
        request: request({
          acks,
          timeout,
          compression,
          topicData,
          transactionalId,
          producerId,
          producerEpoch,
        }),
        response,
      }),
    );
  }
  return builders;
}

const ROOM = Symbol.for('pg-outbox-relay.framingRoom');

/** An Encoder whose `buf` has ROOM free bytes in front of it, in the same ArrayBuffer. */
interface Framable {
  [ROOM]?: number;
}

/**
 * Bytes left in front of a Produce body: the request framing kafkajs writes before it (size 4,
 * api key 2, api version 2, correlation id 4, client id 2 + its bytes). 64 covers a client id
 * of up to 50 bytes; a longer one is framed by kafkajs' copies, as before.
 */
const FRAMING_ROOM = 64;

/**
 * kafkajs frames every request (src/protocol/request.js) as
 * `new Encoder().writeInt32(size).writeEncoder(new Encoder().writeInt16(apiKey)…writeEncoder(body))`:
 * each writeEncoder copies what it is given into a zero-filled buffer of the next power of two.
 * For a 900 kB Produce body that is two 1 MB copies and two 2 MB zero-fills per request, and
 * 4 MB of buffers for the garbage collector to count. When the encoder written is one of ours
 * (it has room in front) and what was written before it fits there, writeEncoder instead writes
 * those few bytes into the room and takes the body's buffer over, room shrunk by as much: the
 * same bytes, no copy of the body. Every other writeEncoder is kafkajs' own.
 */
function framingWithoutCopies(Encoder: new (size?: number) => KafkajsEncoder): void {
  const proto = Encoder.prototype as KafkajsEncoder & {
    writeEncoder(this: KafkajsEncoder & Framable, value: KafkajsEncoder & Framable): unknown;
    [ADOPTING]?: true;
  };
  if (proto[ADOPTING] || typeof proto.writeEncoder !== 'function') return;
  const writeEncoder = proto.writeEncoder;
  proto.writeEncoder = function (this: KafkajsEncoder & Framable, value: KafkajsEncoder & Framable) {
    const room = value?.[ROOM];
    if (room === undefined || this.offset > room || !Buffer.isBuffer(value.buf))
      return writeEncoder.call(this, value);
    const head = this.offset;
    const whole = Buffer.from(value.buf.buffer, value.buf.byteOffset - head, head + value.offset);
    this.buf.copy(whole, 0, 0, head);
    this.buf = whole;
    this.offset = head + value.offset;
    this[ROOM] = room - head;
    return this;
  };
  proto[ADOPTING] = true;
}

const ADOPTING = Symbol.for('pg-outbox-relay.framingWithoutCopies');
