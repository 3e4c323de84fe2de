import { describe, expect, it } from 'vitest';
import { classifySqsError, SqsSinkError } from './sqs-errors.ts';

/** As the SDK raises them: `name` the JSON protocol's type, `Code` the query-compatible code. */
const sdk = (name: string, o: Record<string, unknown> = {}) =>
  Object.assign(new Error(`${name} happened`), {
    name,
    $fault: 'client',
    $metadata: { httpStatusCode: 400 },
    ...o,
  });

describe('SQS error table', () => {
  it('a missing queue is permanent and destination-wide, by name or legacy code (with its ;Sender suffix)', () => {
    for (const e of [
      sdk('QueueDoesNotExist'),
      sdk('SomethingElse', { Code: 'AWS.SimpleQueueService.NonExistentQueue;Sender' }),
      sdk('QueueDoesNotExist', { Code: 'com.amazonaws.sqs#QueueDoesNotExist' }),
    ]) {
      const c = classifySqsError(e);
      expect(c.class).toBe('permanent');
      expect(c.destinationWide).toBe(true);
    }
  });

  it('the message\u2019s own faults are permanent for that event only', () => {
    for (const name of ['InvalidMessageContents', 'InvalidParameterValue', 'BatchRequestTooLong']) {
      const c = classifySqsError(sdk(name));
      expect(c).toMatchObject({ class: 'permanent', reason: name });
      expect(c.destinationWide).toBeUndefined();
    }
  });

  it('throttling, 5xx, network errors, timeouts, bad credentials and the unknown are transient', () => {
    const cases: [unknown, string][] = [
      [sdk('RequestThrottled'), 'RequestThrottled'],
      [sdk('ThrottlingException'), 'ThrottlingException'],
      [sdk('InternalError', { $fault: 'server', $metadata: { httpStatusCode: 500 } }), 'InternalError'],
      [
        Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
        'ECONNREFUSED',
      ],
      [Object.assign(new Error('aborted'), { name: 'TimeoutError' }), 'TimeoutError'],
      [sdk('InvalidClientTokenId'), 'InvalidClientTokenId'],
      [sdk('SignatureDoesNotMatch'), 'SignatureDoesNotMatch'],
      ['a string', 'UNKNOWN'],
    ];
    for (const [e, reason] of cases)
      expect(classifySqsError(e)).toMatchObject({ class: 'transient', reason });
  });

  it('a failed batch entry: SenderFault is permanent (a missing queue destination-wide), the server\u2019s fault transient', () => {
    const refused = new SqsSinkError('ENTRY_REFUSED', 'x', { awsCode: 'InvalidMessageContents' });
    expect(classifySqsError(refused)).toMatchObject({ class: 'permanent', reason: 'InvalidMessageContents' });
    const gone = new SqsSinkError('ENTRY_REFUSED', 'x', { awsCode: 'QueueDoesNotExist' });
    expect(classifySqsError(gone)).toMatchObject({ class: 'permanent', destinationWide: true });
    const failed = new SqsSinkError('ENTRY_FAILED', 'x', { awsCode: 'InternalError' });
    expect(classifySqsError(failed)).toMatchObject({ class: 'transient', reason: 'InternalError' });
    expect(classifySqsError(new SqsSinkError('SQS_MESSAGE_TOO_LARGE', 'x'))).toMatchObject({
      class: 'permanent',
      reason: 'SQS_MESSAGE_TOO_LARGE',
    });
    expect(classifySqsError(new Error('wrapped', { cause: sdk('QueueDoesNotExist') })).class).toBe(
      'permanent',
    );
  });
});
