import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { HeaderError, headerBlock } from './header-block.ts';

/** The bytes nats.js' publish() writes for a headers object (it calls encode(), not in the public type). */
const bytesOf = (h: unknown) => Buffer.from((h as { encode(): Uint8Array }).encode());

/** The block as the sink writes it into a frame (write(), at an offset, within bound()). */
function written(h: Record<string, string>, msgId: string): Buffer {
  const b = headerBlock(h, msgId);
  const buf = Buffer.alloc(b.bound() + 7, 0xee);
  const end = b.write(buf, 3);
  expect(end).toBeLessThanOrEqual(3 + b.bound());
  return buf.subarray(3, end);
}

/** What nats.js' own headers give for the same headers set in the same order (the sink's old path). */
function library(h: Record<string, string>, msgId: string): Buffer {
  const m = headers();
  for (const k in h) m.set(k, h[k]!);
  m.set('Nats-Msg-Id', msgId);
  return bytesOf(m);
}

const relayHeaders = {
  id: '0b6c1f6e-2f4a-4e0b-9a51-6d1c8f3b2a10',
  event_type: 'OrderPlaced',
  aggregate_type: 'Order',
  aggregate_id: 'order-42',
  'content-type': 'application/json',
};

describe('headerBlock', () => {
  it('encodes the same bytes as nats.js headers(): the relay’s headers, row headers, values trimmed, UTF-8', () => {
    const cases: Record<string, string>[] = [
      relayHeaders,
      { ...relayHeaders, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      { 'X-Tenant': ' acme ', lower: 'v', MiXeD: 'ünïcødé ✓', empty: '', ...relayHeaders },
      {},
    ];
    for (const h of cases) {
      expect(bytesOf(headerBlock(h, 'id-1:7'))).toEqual(library(h, 'id-1:7'));
      expect(written(h, 'id-1:7')).toEqual(library(h, 'id-1:7'));
    }
    // Values that leave the character-by-character copy: inner spaces and tabs, spaces and tabs at
    // an end, non-ASCII at an end, a value of spaces only.
    const odd = { a: 'x y', b: 'x\ty', c: ' x', d: 'x ', e: '\tx\t', f: 'é', g: 'x€', h: '   ', i: 'a  b' };
    expect(written(odd, ' id ')).toEqual(library(odd, ' id '));
    expect(bytesOf(headerBlock(odd, ' id '))).toEqual(library(odd, ' id '));
  });

  it('refuses what nats.js refuses: a name with a colon, a space or a non-ASCII byte, a value with CR or LF', () => {
    const bads: Record<string, string>[] = [
      { 'a:b': 'v' },
      { 'a b': 'v' },
      { naïve: 'v' },
      { ok: 'x\ny' },
      { ok: 'x\ry' },
    ];
    for (const bad of bads) {
      expect(() => library(bad, 'i')).toThrow();
      expect(() => bytesOf(headerBlock(bad, 'i'))).toThrow(HeaderError);
      expect(() => written(bad, 'i')).toThrow(HeaderError);
    }
    expect(() => bytesOf(headerBlock({}, 'bad\nid'))).toThrow(/\\r or \\n/);
    expect(() => written({}, 'bad\nid')).toThrow(/\\r or \\n/);
  });

  it('refuses a row header named like a JetStream control header, every time it comes', () => {
    for (const name of ['Nats-Rollup', 'nats-msg-id', 'NATS-Expected-Stream'])
      for (let i = 0; i < 2; i++)
        for (const path of [
          bytesOf,
          (b: ReturnType<typeof headerBlock>) => b.write(Buffer.alloc(b.bound()), 0),
        ])
          expect(() => path(headerBlock({ ...relayHeaders, [name]: 'x' }, 'i'))).toThrow(
            /reserved by NATS JetStream/,
          );
  });
});
