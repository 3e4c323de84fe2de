import { describe, expect, it } from 'vitest';
import {
  classifyRabbitMqError,
  PERMANENT_CHANNEL_CODES,
  RABBITMQ_SINK_CODES,
  type RabbitMqSinkCode,
  RabbitMqSinkError,
} from './rabbitmq-errors.ts';

/** What amqplib hands over when the server closes a channel or a connection. */
const closed = (code: number, channelLevel: boolean) =>
  Object.assign(new Error(`closed by server: ${code}`), { code, classId: 60, methodId: 40, channelLevel });

describe('classifyRabbitMqError', () => {
  it('each channel-level refusal of a publish is permanent', () => {
    for (const code of Object.keys(PERMANENT_CHANNEL_CODES).map(Number))
      expect(classifyRabbitMqError(closed(code, true))).toMatchObject({
        class: 'permanent',
        reason: `AMQP_${code}`,
      });
  });

  it('the same codes closing the connection are about the relay, not the event: transient', () => {
    expect(classifyRabbitMqError(closed(403, false))).toMatchObject({
      class: 'transient',
      reason: 'AMQP_403',
    });
    expect(classifyRabbitMqError(closed(320, false)).class).toBe('transient');
  });

  it("a confirm lost with a channel the server closed for a publish takes that publish's class", () => {
    const e = new RabbitMqSinkError('CHANNEL_CLOSED', 'x', { cause: closed(406, true) });
    expect(classifyRabbitMqError(e)).toMatchObject({ class: 'permanent', reason: 'AMQP_406' });
    const lost = new RabbitMqSinkError('CHANNEL_CLOSED', 'x', { cause: new Error('connection closed') });
    expect(classifyRabbitMqError(lost)).toMatchObject({ class: 'transient', reason: 'CHANNEL_CLOSED' });
  });

  it("the sink's own codes follow their table", () => {
    for (const [code, { permanent }] of Object.entries(RABBITMQ_SINK_CODES))
      expect(classifyRabbitMqError(new RabbitMqSinkError(code as RabbitMqSinkCode, 'm'))).toMatchObject({
        class: permanent ? 'permanent' : 'transient',
        reason: code,
      });
    expect(RABBITMQ_SINK_CODES.NACKED.permanent).toBe(false);
    expect(RABBITMQ_SINK_CODES.UNROUTABLE.permanent).toBe(true);
  });

  it('a missing exchange or no permission on it is destination-wide (the exchange); unroutable, too large and nacks are not', () => {
    const wide = (e: unknown) => classifyRabbitMqError(e).destinationWide === true;
    expect(wide(new RabbitMqSinkError('NO_EXCHANGE', 'm'))).toBe(true);
    expect(wide(closed(404, true))).toBe(true);
    expect(wide(closed(403, true))).toBe(true);
    expect(wide(closed(406, true))).toBe(false);
    expect(wide(closed(404, false))).toBe(false);
    expect(wide(new RabbitMqSinkError('UNROUTABLE', 'm'))).toBe(false);
    expect(wide(new RabbitMqSinkError('NACKED', 'm'))).toBe(false);
  });

  it("amqplib's RangeError for headers over its encoding buffer is permanent; socket errors are transient", () => {
    const e = new RangeError(
      'Encoded field table (headers or arguments) exceeds the 65536 byte encoding buffer',
    );
    expect(classifyRabbitMqError(e)).toMatchObject({ class: 'permanent', reason: 'INVALID_MESSAGE' });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5672'), { code: 'ECONNREFUSED' });
    expect(classifyRabbitMqError(refused)).toMatchObject({ class: 'transient', reason: 'ECONNREFUSED' });
    expect(classifyRabbitMqError('?').class).toBe('transient');
  });
});
