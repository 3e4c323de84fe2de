import { jetstream } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection, type NatsConnectionImpl } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ThrowawayNats } from '../../../test/support/nats-server.ts';
import { headerBlock } from './header-block.ts';
import { classifyNatsError } from './nats-errors.ts';
import { OutboundFrames } from './outbound-frames.ts';
import { PubAcks } from './pub-acks.ts';

/**
 * The fast path against the library it replaces, on a throwaway nats-server: the same PubAck, the
 * same errors (as the classifier sees them) for a stored, a duplicate, a refused (full stream, too
 * large for the stream) and an unanswered (no stream) publish, and a timeout.
 */
let server: ThrowawayNats;
let nc: NatsConnection;
let acks: PubAcks;

const msgId = (id: string) => {
  const h = headers();
  h.set('x-row', 'r');
  h.set('Nats-Msg-Id', id);
  return h;
};

const encoded = (h: unknown) => (h as { encode(): Uint8Array }).encode();

/** What a publish came to, as the sink sees it: the PubAck's fields, or the error's class and reason. */
async function outcome(p: Promise<{ stream: string; seq: number; duplicate: boolean }>) {
  try {
    const a = await p;
    return { stream: a.stream, seq: a.seq, duplicate: a.duplicate };
  } catch (e) {
    const c = classifyNatsError(e);
    return { class: c.class, reason: c.reason, name: (e as Error).name };
  }
}

beforeAll(async () => {
  server = await ThrowawayNats.start();
  await server.addStream({
    name: 'PA',
    subjects: ['pa.ok'],
    storage: 'file' as never,
    duplicate_window: 60e9,
  });
  await server.addStream({
    name: 'PA_FULL',
    subjects: ['pa.full'],
    storage: 'file' as never,
    max_msgs: 1,
    discard: 'new' as never,
  });
  await server.addStream({
    name: 'PA_SMALL',
    subjects: ['pa.small'],
    storage: 'file' as never,
    max_msg_size: 64,
  });
  nc = await connect({ servers: server.url, noAsyncTraces: true });
  acks = new PubAcks(nc, 2000);
}, 60_000);

afterAll(async () => {
  acks?.close();
  await nc?.close();
  await server?.stop();
});

describe('PubAcks', () => {
  it('answers as jetstream.publish() does: stored, duplicate, full, too large, no stream', async () => {
    const js = jetstream(nc, { timeout: 2000 });
    const lib = (subject: string, id: string, size = 8) =>
      outcome(
        js.publish(subject, new Uint8Array(size), {
          msgID: id,
          headers: (() => {
            const h = headers();
            h.set('x-row', 'r');
            return h;
          })(),
        }),
      );
    const fast = (subject: string, id: string, size = 8) =>
      outcome(acks.publish(subject, new Uint8Array(size), msgId(id)));

    // The stored and the duplicate PubAck are read from the connection's bytes (inbound-frames.ts);
    // the errors below go through the library.
    const take = vi.spyOn(acks, 'take');
    expect(await lib('pa.ok', 'a')).toEqual({ stream: 'PA', seq: 1, duplicate: false });
    expect(await fast('pa.ok', 'b')).toEqual({ stream: 'PA', seq: 2, duplicate: false });
    expect(await lib('pa.ok', 'b')).toEqual({ stream: 'PA', seq: 2, duplicate: true });
    expect(await fast('pa.ok', 'a')).toEqual({ stream: 'PA', seq: 1, duplicate: true });
    expect(take.mock.results.map((r) => r.value)).toEqual([true, true]);

    await fast('pa.full', 'f1');
    const fullLib = await lib('pa.full', 'f2');
    expect(fullLib).toMatchObject({ class: 'permanent', reason: 'STREAM_FULL' });
    expect(await fast('pa.full', 'f3')).toEqual(fullLib);

    const bigLib = await lib('pa.small', 's1', 200);
    expect(bigLib).toMatchObject({ class: 'permanent', reason: 'JS_10054' });
    expect(await fast('pa.small', 's2', 200)).toEqual(bigLib);

    const noneLib = await lib('pa.nobody', 'n1');
    expect(noneLib).toMatchObject({ class: 'transient', name: 'JetStreamNotEnabled' });
    expect(await fast('pa.nobody', 'n2')).toEqual(noneLib);
    // f1 stored (taken); f3's and s2's API errors left to the library; n2's 503 is an HMSG, never offered.
    expect(take.mock.results.map((r) => r.value)).toEqual([true, true, true, false, false]);
    take.mockRestore();
  });

  it('writes the frames nc.publish() hands to the connection: ASCII and UTF-8 subjects, empty, binary and slab-sized payloads, back to back', () => {
    const p = (nc as NatsConnectionImpl).protocol;
    const send = p.sendCommand;
    const written: Buffer[] = [];
    p.sendCommand = (cmd, ...payloads) => {
      written.push(Buffer.concat([typeof cmd === 'string' ? Buffer.from(cmd) : cmd, ...payloads]));
    };
    try {
      const cases: [string, Uint8Array][] = [
        ['outbox.event.Order', Buffer.from('{"id":1}')],
        ['outbox.event.Bestellung-ü', new Uint8Array(0)],
        ['a.b', Uint8Array.from([0, 13, 10, 255])],
        ['a.big', Buffer.alloc(100_000, 7)],
      ];
      const lib: Buffer[] = [];
      for (const [subject, data] of cases) {
        nc.publish(subject, data, {
          reply: '_INBOX.x.17',
          headers: msgId('0b6c1f6e-2f4a-4e0b-9a51-6d1c8f3b2a10'),
        });
        lib.push(written.pop()!);
      }
      const out = new OutboundFrames(p);
      for (const [subject, data] of cases) {
        const h = encoded(msgId('0b6c1f6e-2f4a-4e0b-9a51-6d1c8f3b2a10'));
        expect(out.hpub(subject, '_INBOX.x.', 17, h, data)).toBe(true);
      }
      out.flush();
      // equals(), not toEqual(): a byte-by-byte diff of 100 kB takes seconds.
      expect(Buffer.concat(written).equals(Buffer.concat(lib))).toBe(true);
      // The header block's text (the sink's path) gives the same bytes as its encoding.
      written.length = 0;
      const block = headerBlock({ id: 'ü-1', aggregate_id: 'a' }, 'm-1');
      expect(out.hpub('a.b', '_INBOX.x.', 2, block, Buffer.from('x'))).toBe(true);
      out.flush();
      nc.publish('a.b', Buffer.from('x'), { reply: '_INBOX.x.2', headers: block });
      expect(written[0]).toEqual(written[1]);
    } finally {
      p.sendCommand = send;
    }
  });

  it("what nc.publish() refuses is refused with its error: a message over the server's max_payload, a subject with a space", async () => {
    const lib = (subject: string, size: number) => {
      try {
        nc.publish(subject, new Uint8Array(size), { headers: msgId('m') });
        return 'published';
      } catch (e) {
        const c = classifyNatsError(e);
        return { class: c.class, reason: c.reason, name: (e as Error).name };
      }
    };
    const max = nc.info!.max_payload;
    expect(lib('pa.ok', max + 1)).toMatchObject({ class: 'permanent', reason: 'MAX_PAYLOAD' });
    expect(await outcome(acks.publish('pa.ok', new Uint8Array(max + 1), msgId('m1')))).toEqual(
      lib('pa.ok', max + 1),
    );
    expect(await outcome(acks.publish('pa ok', new Uint8Array(1), msgId('m2')))).toEqual(lib('pa ok', 1));
    expect(await outcome(acks.publish('pa.ok', new Uint8Array(1), msgId('m3')))).toMatchObject({
      stream: 'PA',
    });
  });

  it('a server that does not answer: TimeoutError (transient) after the timeout, and the next publish works', async () => {
    const quick = new PubAcks(nc, 300);
    server.freeze();
    await server.frozen();
    try {
      const t0 = Date.now();
      expect(await outcome(quick.publish('pa.ok', new Uint8Array(1), msgId('t1')))).toMatchObject({
        class: 'transient',
        name: 'TimeoutError',
      });
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      server.thaw();
    }
    expect(await outcome(quick.publish('pa.ok', new Uint8Array(1), msgId('t2')))).toMatchObject({
      stream: 'PA',
    });
    quick.close();
    expect(await outcome(quick.publish('pa.ok', new Uint8Array(1), msgId('t3')))).toMatchObject({
      class: 'transient',
    });
  });
});
