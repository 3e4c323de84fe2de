import { createRequire } from 'node:module';
import { encodeProduceBody, type ProduceArgs } from './produce-encoder.ts';

/**
 * Plugs src/sinks/produce-encoder.ts into kafkajs. kafkajs has no hook for its wire encoding, so
 * this wraps the one mutable entry point every Produce request goes through: the `protocol`
 * function of kafkajs' Produce request definition (src/protocol/requests/produce/index.js),
 * which each broker calls per request to pick the versioned request builder. The wrapper
 * keeps kafkajs' request object (api key, version, response parser) and replaces only its
 * `encode` — for versions 3 to 7 (record batches, magic 2) and no compression; everything
 * else, and any message the fast encoder does not take, goes through kafkajs' own `encode`.
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
  const wrapped = ((opts: { version: number }) => {
    const build = original(opts) as RequestBuilder | undefined;
    const version = Number(opts.version);
    if (typeof build !== 'function') return build;
    return (args: Parameters<RequestBuilder>[0]) => {
      requestsBuilt++;
      const built = build(args);
      if (version < 3 || version > 7) return built;
      const kafkajsEncode = built.request.encode;
      if ((args.compression ?? NONE) !== NONE || typeof kafkajsEncode !== 'function') return built;
      built.request.encode = async () => {
        const body = encodeProduceBody(args);
        if (!body) return kafkajsEncode();
        // kafkajs' request framing copies from an Encoder (`buf`, `offset`); a 1-byte one, then ours.
        const e = new Encoder(1);
        e.buf = body;
        e.offset = body.length;
        return e;
      };
      return built;
    };
  }) as ProduceDefinition['protocol'];
  wrapped[FAST] = true;
  produce.protocol = wrapped;
  installed = true;
  return true;
}
