import { describe, expect, it } from 'vitest';
import { CopyReader } from './copy-reader.ts';

/** A backend message: type byte, int32 length (counting itself), body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = type.charCodeAt(0);
  head.writeUInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

let seed = 11;
function rnd(n: number): number {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return (seed >>> 8) % n;
}

function bytes(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = rnd(256);
  return b;
}

/** What the reader should deliver: CopyData bodies, and the other messages, consecutive ones together. */
type Delivery = ['copy' | 'forward', string];

function expected(messages: [string, Buffer][]): Delivery[] {
  const out: Delivery[] = [];
  for (const [type, body] of messages) {
    if (type === 'd') out.push(['copy', body.toString('hex')]);
    else {
      const whole = message(type, body).toString('hex');
      const last = out[out.length - 1];
      if (last?.[0] === 'forward') last[1] += whole;
      else out.push(['forward', whole]);
    }
  }
  return out;
}

function read(stream: Buffer, cuts: number[]): { got: Delivery[]; views: Buffer[] } {
  const got: Delivery[] = [];
  const views: Buffer[] = [];
  const reader = new CopyReader(
    (bytes, start, end) => {
      const m = bytes.subarray(start, end);
      views.push(m);
      got.push(['copy', m.toString('hex')]);
    },
    (b) => {
      const last = got[got.length - 1];
      // One forward per run within a chunk; a run split by a chunk boundary arrives as two.
      if (last?.[0] === 'forward') last[1] += b.toString('hex');
      else got.push(['forward', b.toString('hex')]);
    },
  );
  let at = 0;
  for (const cut of [...cuts, stream.length]) {
    // Each chunk its own buffer, as the socket gives them.
    const chunk = Buffer.from(stream.subarray(at, cut));
    reader.push(chunk);
    at = cut;
  }
  return { got, views };
}

describe('CopyReader', () => {
  it('delivers every message whole and in order, however the bytes are cut (random streams)', () => {
    for (let round = 0; round < 200; round++) {
      const messages: [string, Buffer][] = Array.from({ length: 1 + rnd(30) }, () => {
        const type = ['d', 'd', 'd', 'd', 'E', 'N', 'c', 'C', 'Z', 'W'][rnd(10)]!;
        return [type, bytes([0, 1, 30, 200, 5000][rnd(5)]!)];
      });
      const stream = Buffer.concat(messages.map(([t, b]) => message(t, b)));
      const cuts = [...new Set(Array.from({ length: rnd(40) }, () => rnd(stream.length + 1)))].sort(
        (a, b) => a - b,
      );
      const { got, views } = read(stream, cuts);
      expect(got).toEqual(expected(messages));
      // The views handed out still hold their bytes after everything was read: the reader never
      // writes into a buffer it handed a view of (its buffers for split messages are new each time).
      const copies = messages.filter(([t]) => t === 'd').map(([, b]) => b.toString('hex'));
      expect(views.map((v) => v.toString('hex'))).toEqual(copies);
    }
  });

  it('cuts inside the header, one byte at a time', () => {
    const messages: [string, Buffer][] = [
      ['d', Buffer.from('hello')],
      ['c', Buffer.alloc(0)],
      ['d', bytes(70_000)],
      ['Z', Buffer.from('I')],
    ];
    const stream = Buffer.concat(messages.map(([t, b]) => message(t, b)));
    const cuts = Array.from({ length: stream.length - 1 }, (_, i) => i + 1).filter(
      (i) => i < 40 || i % 997 === 0,
    );
    expect(read(stream, cuts).got).toEqual(expected(messages));
  });

  it('refuses a length that does not count itself (not the server protocol)', () => {
    const bad = Buffer.from([0x64, 0, 0, 0, 2, 0xff]);
    const reader = new CopyReader(
      () => {},
      () => {},
    );
    expect(() => reader.push(bad)).toThrow(/malformed message from the server: type 0x64, length 2/);
  });
});
