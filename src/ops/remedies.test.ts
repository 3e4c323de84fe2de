import { describe, expect, it } from 'vitest';
import { PERMANENT_KAFKA_TYPES } from '../sinks/kafka/kafka-errors.ts';
import { REMEDIED_KAFKA_TYPES, reasonOf, remedyFor } from './remedies.ts';

describe('remedies', () => {
  it('every permanent Kafka type of the classification table has a fix, and its cause is the table’s', () => {
    for (const type of Object.keys(PERMANENT_KAFKA_TYPES)) {
      expect(REMEDIED_KAFKA_TYPES, type).toContain(type);
      expect(remedyFor(type, 't').cause).toBe(PERMANENT_KAFKA_TYPES[type]);
    }
  });

  it('names the topic in the fix', () => {
    expect(remedyFor('UNKNOWN_TOPIC_OR_PARTITION', 'outbox.event.X').fix).toMatch(
      /create the topic: .*--create --topic outbox\.event\.X/,
    );
    expect(remedyFor('TOPIC_AUTHORIZATION_FAILED', 'orders').fix).toMatch(
      /kafka-acls\.sh .*--operation Write .*--topic orders/,
    );
    expect(remedyFor('MESSAGE_TOO_LARGE', 'big').fix).toMatch(
      /--entity-name big --add-config max\.message\.bytes=/,
    );
  });

  it('Redis Streams refusals: the key that is not a stream, a value over proto-max-bulk-len', () => {
    expect(remedyFor('WRONGTYPE', 'outbox.event.Order')).toMatchObject({
      cause: expect.stringMatching(/not a stream/),
      fix: expect.stringMatching(/redis-cli TYPE outbox\.event\.Order.*--redis-stream-template/),
    });
    expect(remedyFor('VALUE_TOO_LARGE', 't').fix).toMatch(/proto-max-bulk-len/);
  });

  it('SQS refusals (sinks/sqs/sqs-errors.ts): the queue to create, the size option, the body', () => {
    expect(remedyFor('QueueDoesNotExist', 'Order')).toMatchObject({
      cause: expect.stringMatching(/queue does not exist/),
      fix: expect.stringMatching(/create the SQS queue .* topic Order .*aws sqs create-queue/),
    });
    expect(remedyFor('SQS_MESSAGE_TOO_LARGE', 't').fix).toMatch(/--sqs-max-message-bytes/);
    expect(remedyFor('SQS_INVALID_MESSAGE', 't').fix).toMatch(/UTF-8 text/);
    // Another sink's INVALID_MESSAGE is not SQS's.
    expect(remedyFor('INVALID_MESSAGE', 't').fix).toMatch(/read the error/);
  });

  it('webhook refusals (sinks/http/http-errors.ts): by the status the receiver answered', () => {
    expect(remedyFor('HTTP_302', 'orders')).toMatchObject({
      cause: expect.stringMatching(/redirect/),
      fix: expect.stringMatching(/--http-url .*Location/),
    });
    expect(remedyFor('HTTP_401', 'orders').fix).toMatch(/secret .*WEBHOOK_SECRET/);
    expect(remedyFor('HTTP_404', 'orders').fix).toMatch(/fix --http-url .*topic orders/);
    expect(remedyFor('HTTP_413', 't').fix).toMatch(/--http-batch-size/);
    expect(remedyFor('HTTP_400', 'orders')).toMatchObject({
      cause: expect.stringMatching(/receiver refused the event/),
      fix: expect.stringMatching(/receiver of topic orders refused/),
    });
    expect(remedyFor('INVALID_EVENT', 't').fix).toMatch(/header/);
  });

  it('rows the router refused: fix the row; unknown reasons: read the error', () => {
    expect(remedyFor('ROW_INVALID', 't').fix).toMatch(/fix the row/);
    expect(remedyFor(null, 't')).toMatchObject({ reason: null, cause: null });
    expect(remedyFor('SOMETHING_NEW', 't').fix).toMatch(/read the error/);
  });

  it('reads the reason of a last_error as failure-policy.ts writes it', () => {
    expect(reasonOf('permanent/UNKNOWN_TOPIC_OR_PARTITION: topic does not exist: x')).toBe(
      'UNKNOWN_TOPIC_OR_PARTITION',
    );
    expect(reasonOf('permanent/ROW_INVALID: payload')).toBe('ROW_INVALID');
    // The webhook sink's reasons carry the status (http-errors.ts).
    expect(reasonOf('permanent/HTTP_400: HTTP 400 from POST http://h/x: no')).toBe('HTTP_400');
    expect(reasonOf(null)).toBeNull();
    expect(reasonOf('whatever')).toBeNull();
  });
});
