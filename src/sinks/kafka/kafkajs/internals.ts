import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * What each of the relay's kafkajs patches relies on inside kafkajs — modules by path, functions
 * and fields that are not kafkajs' public API — as checks that each say what is not as expected.
 * install.ts runs them at start: a patch whose internals are all there is installed, any other
 * is left out and named in the start-up log (kafkajs then does the work itself, as before the
 * patch). internals.test.ts asserts every check against the pinned kafkajs (package.json pins it
 * exactly), so an upgrade that moves one fails there, not silently in production. README.md beside
 * this file is the inventory: what each patch replaces, why, its measured figure, its fallback.
 */

/** The kafkajs these patches were written for and are tested against (package.json pins it). */
export const TESTED_KAFKAJS = '2.2.4';

export interface InternalCheck {
  /** What must hold, in kafkajs' terms. */
  what: string;
  ok: () => boolean;
}

export type KafkajsPatchName = 'send-messages' | 'produce-encoder' | 'request-queue' | 'log-levels';

const require = createRequire(import.meta.url);

/** kafkajs' module at `path` (under kafkajs/src/), or undefined when it is not there. */
function mod(path: string): unknown {
  try {
    return require(`kafkajs/src/${path}`);
  } catch {
    return undefined;
  }
}

/** The source text of kafkajs' module at `path`, '' when it is not there. */
function source(path: string): string {
  try {
    return readFileSync(require.resolve(`kafkajs/src/${path}`), 'utf8');
  } catch {
    return '';
  }
}

const fn = (v: unknown): boolean => typeof v === 'function';
const proto = (path: string): Record<string, unknown> =>
  ((mod(path) as { prototype?: Record<string, unknown> } | undefined)?.prototype ?? {}) as Record<
    string,
    unknown
  >;
const methods = (what: string, path: string, names: readonly string[]): InternalCheck => ({
  what: `${what} (${path}) has ${names.join(', ')}`,
  ok: () => names.every((n) => fn(proto(path)[n])),
});
const says = (path: string, ...texts: string[]): InternalCheck => ({
  what: `${path} says ${texts.map((t) => JSON.stringify(t)).join(' and ')}`,
  ok: () => {
    const s = source(path);
    return texts.every((t) => s.includes(t));
  },
});
const exportsFunction = (path: string, name?: string): InternalCheck => ({
  what: `${path} exports ${name ?? 'a function'}`,
  ok: () => {
    const m = mod(path) as Record<string, unknown> | undefined;
    return fn(name === undefined ? m : m?.[name]);
  },
});

/** The eos manager kafkajs builds per producer: its methods, read from one made without a broker. */
function eosMethods(names: readonly string[]): InternalCheck {
  return {
    what: `producer/eosManager/index.js makes an object with ${names.join(', ')}`,
    ok: () => {
      const make = mod('producer/eosManager/index.js');
      if (!fn(make)) return false;
      const quiet = { namespace: () => quiet, debug() {}, info() {}, warn() {}, error() {} };
      try {
        const m = (make as (a: object) => Record<string, unknown>)({
          logger: quiet,
          cluster: {},
          transactionTimeout: 60_000,
          transactional: false,
        });
        return names.every((n) => fn(m[n]));
      } catch {
        return false;
      }
    },
  };
}

export const KAFKAJS_INTERNALS: Record<KafkajsPatchName, readonly InternalCheck[]> = {
  // client.ts loads a second producer chain that requires send-messages.ts in place of
  // producer/sendMessages.js; send-messages.ts drives kafkajs' cluster and eos manager.
  'send-messages': [
    exportsFunction('producer/sendMessages.js'),
    says('producer/messageProducer.js', "require('./sendMessages')", 'createSendMessages({'),
    says('producer/messageProducer.js', 'logger,', 'cluster,', 'retrier,', 'partitioner,', 'eosManager,'),
    says('producer/index.js', "require('./messageProducer')"),
    says('index.js', "require('./producer')"),
    methods('Cluster', 'cluster/index.js', [
      'isConnected',
      'connect',
      'removeBroker',
      'refreshMetadata',
      'refreshMetadataIfNecessary',
      'addMultipleTargetTopics',
      'findBroker',
      'findTopicPartitionMetadata',
      'findLeaderForPartitions',
      'findGroupCoordinator',
    ]),
    says('cluster/index.js', 'this.targetTopics = new Set()', 'this.brokerPool = new BrokerPool'),
    eosMethods([
      'isTransactional',
      'getTransactionalId',
      'getProducerId',
      'getProducerEpoch',
      'getSequence',
      'updateSequence',
      'acquireBrokerLock',
      'releaseBrokerLock',
      'addPartitionsToTransaction',
      'commit',
      'abort',
      'sendOffsets',
    ]),
    exportsFunction('errors.js', 'KafkaJSMetadataNotLoaded'),
    exportsFunction('protocol/error.js', 'staleMetadata'),
    exportsFunction('producer/responseSerializer.js'),
  ],
  // produce-hook.ts wraps the Produce request definition's `protocol` and builds v3 – v7 itself.
  'produce-encoder': [
    {
      what: 'protocol/requests/produce/index.js has a protocol function and versions 3 to 7',
      ok: () => {
        const p = mod('protocol/requests/produce/index.js') as
          | { protocol?: unknown; versions?: unknown }
          | undefined;
        return (
          fn(p?.protocol) &&
          Array.isArray(p?.versions) &&
          ['3', '4', '5', '6', '7'].every((v) => (p.versions as string[]).includes(v))
        );
      },
    },
    ...[3, 4, 5, 6, 7].flatMap((v) => [
      exportsFunction(`protocol/requests/produce/v${v}/request.js`),
      exportsFunction(`protocol/requests/produce/v${v}/response.js`, 'parse'),
    ]),
    methods('Encoder', 'protocol/encoder.js', ['writeEncoder']),
    says('protocol/encoder.js', 'this.buf', 'this.offset'),
  ],
  // request-queue.ts replaces RequestQueue.prototype.scheduleCheckPendingRequests.
  'request-queue': [
    methods('RequestQueue', 'network/requestQueue/index.js', [
      'scheduleCheckPendingRequests',
      'checkPendingRequests',
    ]),
    says(
      'network/requestQueue/index.js',
      'this.pending =',
      'this.throttledUntil =',
      'this.throttleCheckTimeoutId =',
    ),
  ],
  // log.ts reads kafkajs' error table to know its permanent errors' messages in log lines.
  'log-levels': [
    {
      what: 'protocol/error.js exports errorCodes, each with a type and a message',
      ok: () => {
        const codes = (mod('protocol/error.js') as { errorCodes?: unknown } | undefined)?.errorCodes;
        return (
          Array.isArray(codes) &&
          codes.length > 0 &&
          codes.every((c) => typeof c?.type === 'string' && typeof c?.message === 'string')
        );
      },
    },
  ],
};

/** The kafkajs that `import 'kafkajs'` resolves to. */
export function kafkajsVersion(): string {
  try {
    return (require('kafkajs/package.json') as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Of a patch's checks, those that fail (what is not as expected). */
export function missingInternals(patch: KafkajsPatchName): string[] {
  return KAFKAJS_INTERNALS[patch].filter((c) => !c.ok()).map((c) => c.what);
}
