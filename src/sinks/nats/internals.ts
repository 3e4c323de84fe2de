import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { BaseApiClientImpl, jserrors } from '@nats-io/jetstream/internal';
import { MsgHdrsImpl, NatsConnectionImpl, Parser, ProtocolHandler } from '@nats-io/transport-node';

/**
 * What the NATS sink's fast paths rely on inside nats.js (@nats-io/transport-node, its
 * nats-core, @nats-io/jetstream/internal) beyond the public API, as checks that each say what is
 * not as expected. internals.test.ts asserts them against the pinned packages (package.json pins
 * them exactly); README.md beside this file is the inventory. At run time each fast path checks
 * its own piece when a connection is made and otherwise leaves the work to the library
 * (inbound-frames.ts: the parser reads every frame; pub-acks.ts: nc.publish() and the library's
 * PubAck path); the sink logs which are active (nats-sink.ts).
 */

/** The nats.js these fast paths were written for and are tested against (package.json pins it). */
export const TESTED_NATS = { '@nats-io/transport-node': '3.4.0', '@nats-io/jetstream': '3.4.0' } as const;

export type NatsFastPath = 'inbound-frames' | 'outbound-frames' | 'pub-acks';

export interface InternalCheck {
  what: string;
  ok: () => boolean;
}

const fn = (v: unknown): boolean => typeof v === 'function';
const text = (v: unknown): string => (typeof v === 'function' ? String(v) : '');
const has = (what: string, o: object, names: readonly string[]): InternalCheck => ({
  what: `${what} has ${names.join(', ')}`,
  ok: () => names.every((n) => fn((o as Record<string, unknown>)[n])),
});
const says = (what: string, source: () => string, ...texts: string[]): InternalCheck => ({
  what: `${what} says ${texts.map((t) => JSON.stringify(t)).join(' and ')}`,
  ok: () => texts.every((t) => source().includes(t)),
});

const protocolSource = () => text(ProtocolHandler);

export const NATS_INTERNALS: Record<NatsFastPath, readonly InternalCheck[]> = {
  // inbound-frames.ts puts a splitter in front of the protocol handler's `parser`, which the
  // handler replaces with a new Parser on every reconnect; pub-acks.ts counts what it takes.
  'inbound-frames': [
    has('Parser.prototype', Parser.prototype, ['parse']),
    {
      what: 'ProtocolHandler assigns this.parser = new Parser(this)',
      ok: () => /this\.parser = new [\w$.]*Parser\(this\)/.test(protocolSource()),
    },
    says('ProtocolHandler', protocolSource, 'this.inMsgs', 'this.inBytes'),
    // What processMsg counts for a message it dispatches, as take() counts a PubAck it reads.
    says(
      'ProtocolHandler.prototype.processMsg',
      () => text(ProtocolHandler.prototype.processMsg),
      'sub.received += 1',
    ),
  ],
  // outbound-frames.ts writes HPUB frames into a slab and hands it to the handler's buffer.
  'outbound-frames': [
    has('ProtocolHandler.prototype', ProtocolHandler.prototype, ['sendCommand', 'flushPending', 'publish']),
    says(
      'ProtocolHandler',
      protocolSource,
      'this.outMsgs',
      'this.outBytes',
      'this.pendingLimit',
      'this.noMorePublishing',
      'this.info',
    ),
  ],
  // pub-acks.ts: PubAcks on one reply subscription; API errors parsed by the library's parser.
  'pub-acks': [
    has('BaseApiClientImpl.prototype (@nats-io/jetstream/internal)', BaseApiClientImpl.prototype, [
      'parseJsResponse',
    ]),
    {
      what: 'jserrors (@nats-io/jetstream/internal) has JetStreamNotEnabled',
      ok: () => fn((jserrors as Record<string, unknown>).JetStreamNotEnabled),
    },
    has('MsgHdrsImpl.prototype', MsgHdrsImpl.prototype, ['encode']),
    says(
      'NatsConnectionImpl.prototype._check',
      () => text(NatsConnectionImpl.prototype._check),
      'whitespaceRegex.test(subject)',
      'this.protocol.noMorePublishing',
    ),
  ],
};

/** Of a fast path's checks, those that fail (what is not as expected). */
export function missingNatsInternals(path: NatsFastPath): string[] {
  return NATS_INTERNALS[path].filter((c) => !c.ok()).map((c) => c.what);
}

const require = createRequire(import.meta.url);

/** The installed version of a nats.js package (its package.json, beside its entry point). */
export function natsVersion(name: keyof typeof TESTED_NATS): string {
  try {
    let dir = dirname(require.resolve(name));
    for (let i = 0; i < 4; i++, dir = dirname(dir)) {
      try {
        const p = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
          name?: string;
          version?: string;
        };
        if (p.name === name) return p.version ?? 'unknown';
      } catch {}
    }
  } catch {}
  return 'unknown';
}
