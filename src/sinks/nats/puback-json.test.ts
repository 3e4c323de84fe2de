import { describe, expect, it } from 'vitest';
import { parsePubAck } from './puback-json.ts';

/** The PubAck reader against JSON.parse (with duplicate set as jetstream.publish() sets it). */
const read = (text: string) => {
  const b = Buffer.from(`xx${text}yy`); // not at offset 0, not to the buffer's end
  return parsePubAck(b, 2, b.length - 2);
};
const json = (text: string) => {
  const a = JSON.parse(text);
  a.duplicate = a.duplicate === true;
  return a;
};

describe('parsePubAck', () => {
  it('reads what JSON.parse reads for the forms nats-server writes (2.9 by hand, later ones by encoding/json)', () => {
    for (const text of [
      '{"stream":"OUTBOX", "seq":1}',
      '{"stream":"OUTBOX", "seq":3,"duplicate": true}',
      '{"stream":"OUTBOX", "domain":"hub", "seq":3}',
      ' { "seq" : 5 , "stream" : "S" , "duplicate" : false } ',
      '{"stream":"OUTBOX","seq":1}',
      '{"stream":"OUTBOX","seq":0}',
      '{"stream":"OUTBOX","seq":123456789012345}',
      '{"stream":"OUTBOX","seq":42,"duplicate":true}',
      '{"stream":"hub-stream","domain":"hub","seq":7}',
      '{"stream":"S","domain":"","seq":7,"duplicate":true}',
      '{"stream":"ünïcødé","seq":9}',
    ]) {
      expect(read(text), text).toEqual(json(text));
    }
  });

  it('gives the same string for the same stream name twice, and a new one for another', () => {
    const a = read('{"stream":"ONE","seq":1}')!;
    const b = read('{"stream":"ONE","seq":2}')!;
    const c = read('{"stream":"TWO","seq":3}')!;
    expect([a.stream, b.stream, c.stream]).toEqual(['ONE', 'ONE', 'TWO']);
  });

  it('leaves everything else to the library: errors, other keys, a key twice, escapes, no stream, odd numbers', () => {
    for (const text of [
      '{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}',
      '{"stream":"S","seq":1,"error":{"code":400}}',
      '{"stream":"S","seq":1,"batch":"b","count":2}',
      '{"stream":"S\\"x","seq":1}',
      '{"stream":"","seq":1}',
      '{"stream":"S","seq":1,"seq":2}',
      '{"stream":"S","stream":"T","seq":1}',
      '{"seq":1}',
      '{"stream":"S"}',
      '{"stream":1,"seq":1}',
      '{"stream":"S","seq":1,"duplicate":"true"}',
      '{"stream":"S","seq":1,}',
      '{}',
      '[]',
      '{"stream":"S","seq":-1}',
      '{"stream":"S","seq":01}',
      '{"stream":"S","seq":1.5}',
      '{"stream":"S","seq":1e3}',
      '{"stream":"S","seq":12345678901234567890}',
      '{"stream":"S","seq":1}x',
      '{"stream":"S","seq":',
      '{"stream":"S"',
      '',
    ]) {
      expect(read(text), text).toBeNull();
    }
  });
});
