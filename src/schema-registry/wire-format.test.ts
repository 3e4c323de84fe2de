import { describe, expect, it } from 'vitest';
import { envelopeSchema } from './envelope-schema.ts';
import { subjectFor } from './subject.ts';
import { frame, frameHeader, messageIndexes, unframeProtobuf } from './wire-format.ts';

describe('Confluent wire format', () => {
  it('message indexes: [0] is the single byte 0, others a zigzag varint count then zigzag varint indexes', () => {
    expect([...messageIndexes([0])]).toEqual([0]);
    expect([...messageIndexes([1])]).toEqual([2, 2]);
    expect([...messageIndexes([1, 0])]).toEqual([4, 2, 0]);
    // 64 → zigzag 128 → varint 0x80 0x01.
    expect([...messageIndexes([64])]).toEqual([2, 0x80, 0x01]);
  });

  it('header: magic byte 0, the id as 4 bytes big-endian, then the indexes', () => {
    expect([...frameHeader(0x01020304, [0])]).toEqual([0, 1, 2, 3, 4, 0]);
    expect([...frameHeader(7, null)]).toEqual([0, 0, 0, 0, 7]);
    expect(() => frameHeader(2 ** 32, [0])).toThrow(RangeError);
  });

  it('frames a value behind the header', () => {
    expect([...frame(frameHeader(1, [0]), Buffer.from([9, 8]))]).toEqual([0, 0, 0, 0, 1, 0, 9, 8]);
  });
});

describe('unframeProtobuf', () => {
  it('strips the framing (any message indexes) and leaves an unframed message as it is', () => {
    const msg = Buffer.from([0x0a, 0x01, 0x41]);
    expect([...unframeProtobuf(frame(frameHeader(9, [0]), msg))]).toEqual([...msg]);
    expect([...unframeProtobuf(frame(frameHeader(9, [1, 0]), msg))]).toEqual([...msg]);
    expect([...unframeProtobuf(frame(frameHeader(9, [64]), msg))]).toEqual([...msg]);
    expect(unframeProtobuf(msg)).toBe(msg);
    expect(unframeProtobuf(Buffer.alloc(0)).length).toBe(0);
    expect(() => unframeProtobuf(Buffer.from([0, 0, 0]))).toThrow(RangeError);
  });
});

describe('the registered schema', () => {
  it('is the envelope .proto, its record name, and Envelope as the first message ([0])', () => {
    const s = envelopeSchema();
    expect(s.schemaType).toBe('PROTOBUF');
    expect(s.schema).toMatch(/^package outbox\.v1;$/m);
    expect(s.schema).toMatch(/^message Envelope \{$/m);
    expect(s.recordName).toBe('outbox.v1.Envelope');
    expect(s.messageIndexes).toEqual([0]);
  });

  it('subjects: TopicNameStrategy <topic>-value, RecordNameStrategy the record name', () => {
    expect(subjectFor('topic-name', 'outbox.event.Order', 'outbox.v1.Envelope')).toBe(
      'outbox.event.Order-value',
    );
    expect(subjectFor('record-name', 'outbox.event.Order', 'outbox.v1.Envelope')).toBe('outbox.v1.Envelope');
  });
});
