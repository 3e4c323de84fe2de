import { Kind, type MsgArg, Parser, type ParserEvent } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { FrameSplitter, type FrameTaker } from './inbound-frames.ts';
import { parsePubAck } from './puback-json.ts';

/**
 * The splitter against nats.js' own Parser: the same bytes, cut into reads at every position,
 * give the same events in the same order — whether the library or the taker (the sink's PubAck
 * reader, on sid 7) got each MSG.
 */
const TD = new TextDecoder();
const OURS = 7;

type Event = string;

/** An event as the library's dispatcher receives it, in a comparable form. */
function describeEvent(e: ParserEvent): Event {
  if (e.kind !== Kind.MSG) return `${e.kind}:${e.data ? TD.decode(e.data) : ''}`;
  const m = e.msg as MsgArg;
  const reply = m.reply ? TD.decode(m.reply) : '-';
  return `MSG ${TD.decode(m.subject)} ${m.sid} ${reply} ${m.hdr} ${Buffer.from(e.data!).toString('hex')}`;
}

/** nats.js' Parser over the reads, recording what it dispatches. */
function library(reads: Uint8Array[]): Event[] {
  const events: Event[] = [];
  const parser = new Parser({ push: (e: ParserEvent) => events.push(describeEvent(e)) });
  for (const r of reads) parser.parse(r);
  return events;
}

/** The splitter over the same reads, its library a Parser recording into the same list. */
function split(reads: Uint8Array[]): { events: Event[]; taken: number } {
  const events: Event[] = [];
  const parser = new Parser({ push: (e: ParserEvent) => events.push(describeEvent(e)) });
  let taken = 0;
  const splitter = new FrameSplitter((b) => parser.parse(b));
  const taker: FrameTaker = {
    take(buf, subject, subjectEnd, data, dataEnd) {
      // As PubAcks.take: only the PubAcks it can read; everything else back to the library.
      if (parsePubAck(buf, data, dataEnd) === null) return false;
      taken++;
      const hex = buf.subarray(data, dataEnd).toString('hex');
      events.push(`MSG ${buf.toString('utf8', subject, subjectEnd)} ${OURS} - -1 ${hex}`);
      return true;
    },
  };
  splitter.setTaker(OURS, taker);
  for (const r of reads) splitter.push(r);
  return { events, taken };
}

const ack = (token: number, body: string) =>
  `MSG _INBOX.abc.${token} ${OURS} ${Buffer.byteLength(body)}\r\n${body}\r\n`;
const hmsg = (subject: string, sid: number, head: string, body: string) =>
  `HMSG ${subject} ${sid} ${head.length} ${head.length + body.length}\r\n${head}${body}\r\n`;
const status503 = `NATS/1.0 503\r\n\r\n`;
const error =
  '{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}';

const STREAM = Buffer.from(
  [
    'INFO {"server_id":"x","headers":true,"max_payload":1048576}\r\n',
    'PING\r\n',
    '+OK\r\n',
    ack(1, '{"stream":"OUTBOX","seq":1}'),
    ack(2, '{"stream":"OUTBOX","seq":2,"duplicate":true}'),
    ack(3, '{"stream":"OUTBOX","domain":"hub","seq":3}'),
    ack(4, error),
    hmsg('_INBOX.abc.5', OURS, status503, ''),
    'MSG other.subject 3 _INBOX.r.1 5\r\nhello\r\n',
    `MSG _INBOX.abc.6 ${OURS} _INBOX.reply 2\r\n{}\r\n`,
    hmsg('with.headers', 3, 'NATS/1.0\r\nA: b\r\n\r\n', 'abc'),
    'MSG\tspaced.out  3   4\r\n\r\n\r\n\r\n',
    ack(7, '{"stream":"OUTBOX","seq":7}'),
    '-ERR \'Permissions Violation for Publish to "x"\'\r\n',
    'PONG\r\n',
    ack(8, '{"stream":"ünï","seq":8}'),
    ack(9, ''),
    ack(10, '{"stream":"OUTBOX", "seq":10,"duplicate": true}'),
  ].join(''),
);

describe('FrameSplitter', () => {
  it('dispatches what nats.js Parser dispatches, in order, and takes only the PubAcks it reads', () => {
    const expected = library([STREAM]);
    expect(expected).toHaveLength(18);
    const whole = split([STREAM]);
    expect(whole.events).toEqual(expected);
    // 1, 2, 3, 7, 8 and 10; not the error, the 503, the one with a reply subject, nor the empty one.
    expect(whole.taken).toBe(6);
  });

  it('a frame split across two socket reads, at every position', () => {
    const expected = library([STREAM]);
    for (let at = 1; at < STREAM.length; at++) {
      const got = split([STREAM.subarray(0, at), STREAM.subarray(at)]);
      expect(got.events, `split at ${at}`).toEqual(expected);
      expect(got.taken).toBe(6);
    }
  });

  it('byte by byte, and in reads of a few bytes (Uint8Arrays, not Buffers)', () => {
    const expected = library([STREAM]);
    for (const size of [1, 2, 3, 7, 64]) {
      const reads: Uint8Array[] = [];
      for (let at = 0; at < STREAM.length; at += size)
        reads.push(new Uint8Array(STREAM.subarray(at, Math.min(STREAM.length, at + size))));
      expect(split(reads).events, `reads of ${size}`).toEqual(expected);
    }
  });

  it('a large message in many reads is joined once it is complete', () => {
    const body = 'x'.repeat(300_000);
    const bytes = Buffer.from(
      `MSG big.one 3 ${body.length}\r\n${body}\r\n${ack(1, '{"stream":"S","seq":1}')}`,
    );
    const reads: Buffer[] = [];
    for (let at = 0; at < bytes.length; at += 65_536) reads.push(bytes.subarray(at, at + 65_536));
    expect(split(reads).events).toEqual(library([bytes]));
  });

  it('bytes it does not understand go to the library, which raises its own error', () => {
    const bad = Buffer.concat([Buffer.from(ack(1, '{"stream":"S","seq":1}')), Buffer.from('XYZ\r\n')]);
    expect(() => library([bad])).toThrow(/parse error/);
    expect(() => split([bad])).toThrow(/parse error/);
    const badSize = Buffer.from('MSG a 7 12x\r\nxx\r\n');
    expect(() => library([badSize])).toThrow(/Bad or Missing Size/);
    expect(() => split([badSize])).toThrow(/Bad or Missing Size/);
  });

  it('a reset (reconnect) drops what was carried from the old connection', () => {
    const events: Event[] = [];
    const parser = new Parser({ push: (e: ParserEvent) => events.push(describeEvent(e)) });
    const splitter = new FrameSplitter((b) => parser.parse(b));
    splitter.push(Buffer.from('MSG a.b 3 10\r\nhalf'));
    splitter.reset();
    splitter.push(Buffer.from('PING\r\n'));
    expect(events).toEqual([`${Kind.PING}:`]);
  });
});
