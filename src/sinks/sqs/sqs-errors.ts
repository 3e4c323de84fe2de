/**
 * Classifies what sending to Amazon SQS raised (design.md §4). Pure and table-driven, as
 * src/sinks/nats/nats-errors.ts. Permanent: this message cannot be taken as it is until someone
 * changes the queue, its policy or the message — the event is recorded failed, the others flow,
 * the sweeper retries it later. Everything else — throttling, a 5xx, a lost connection, a
 * timeout, anything unknown — is transient: the batch is sent again, nothing is skipped.
 *
 * Where the codes come from:
 *   - a SendMessageBatch entry that failed (`Failed[]`: Code, SenderFault): the sink raises
 *     ENTRY_REFUSED (SenderFault, the message's fault: permanent) or ENTRY_FAILED (the server's:
 *     transient);
 *   - a request that failed as a whole: the SDK's error, whose `name` is the JSON protocol's
 *     error type (QueueDoesNotExist) and whose `Code`, for queues answering in the query-compatible
 *     form, the legacy code (AWS.SimpleQueueService.NonExistentQueue); both are looked up;
 *   - refusals the sink makes itself before sending (SQS_MESSAGE_TOO_LARGE, SQS_INVALID_MESSAGE).
 * Credentials that do not work (InvalidClientTokenId, SignatureDoesNotMatch, ExpiredToken) are the
 * relay's problem, not the event's: transient, as a refused broker login is.
 */
import type { Classified } from '../../errors.ts';

export type SqsSinkCode = 'SQS_MESSAGE_TOO_LARGE' | 'SQS_INVALID_MESSAGE' | 'ENTRY_REFUSED' | 'ENTRY_FAILED';

export class SqsSinkError extends Error {
  override readonly name = 'SqsSinkError';
  readonly code: SqsSinkCode;
  /** For ENTRY_REFUSED / ENTRY_FAILED: the entry's Code as SQS gave it. */
  readonly awsCode: string | undefined;
  constructor(code: SqsSinkCode, message: string, options?: ErrorOptions & { awsCode?: string }) {
    super(message, options);
    this.code = code;
    this.awsCode = options?.awsCode;
  }
}

export const SQS_SINK_CODES: Readonly<Record<SqsSinkCode, { permanent: boolean; meaning: string }>> = {
  SQS_MESSAGE_TOO_LARGE: {
    permanent: true,
    meaning: 'the message (body and attributes) is over --sqs-max-message-bytes',
  },
  SQS_INVALID_MESSAGE: {
    permanent: true,
    meaning: 'the event cannot be an SQS message (a tombstone, or a value that is not UTF-8 text)',
  },
  ENTRY_REFUSED: { permanent: true, meaning: 'SQS refused this entry of the batch (SenderFault)' },
  ENTRY_FAILED: { permanent: false, meaning: 'SQS failed this entry of the batch on its side' },
};

/**
 * SQS error codes (JSON protocol names and legacy query codes) that refuse the message or the
 * queue for good. destinationWide: the queue as a whole refuses (Classified.destinationWide).
 */
export const PERMANENT_SQS_ERRORS: Readonly<Record<string, { destinationWide?: true; meaning: string }>> = {
  QueueDoesNotExist: {
    destinationWide: true,
    meaning: 'the queue does not exist: create it, or fix --sqs-queue-url-template',
  },
  'AWS.SimpleQueueService.NonExistentQueue': {
    destinationWide: true,
    meaning: 'the queue does not exist: create it, or fix --sqs-queue-url-template',
  },
  QueueDeletedRecently: { destinationWide: true, meaning: 'the queue was deleted less than 60 s ago' },
  'AWS.SimpleQueueService.QueueDeletedRecently': {
    destinationWide: true,
    meaning: 'the queue was deleted less than 60 s ago',
  },
  InvalidAddress: { destinationWide: true, meaning: 'the queue URL is not valid' },
  InvalidSecurity: { destinationWide: true, meaning: 'the queue requires HTTPS (or SigV4)' },
  AccessDenied: {
    destinationWide: true,
    meaning: "the queue's policy or the relay's IAM role does not allow sqs:SendMessage",
  },
  AccessDeniedException: {
    destinationWide: true,
    meaning: "the queue's policy or the relay's IAM role does not allow sqs:SendMessage",
  },
  KmsAccessDenied: { destinationWide: true, meaning: "the relay may not use the queue's KMS key" },
  KmsDisabled: { destinationWide: true, meaning: "the queue's KMS key is disabled" },
  KmsNotFound: { destinationWide: true, meaning: "the queue's KMS key does not exist" },
  KmsInvalidState: { destinationWide: true, meaning: "the queue's KMS key is not usable" },
  KmsInvalidKeyUsage: { destinationWide: true, meaning: "the queue's KMS key cannot encrypt" },
  KmsOptInRequired: { destinationWide: true, meaning: 'KMS is not enabled for the account' },
  UnsupportedOperation: { destinationWide: true, meaning: 'the queue does not support this operation' },
  'AWS.SimpleQueueService.UnsupportedOperation': {
    destinationWide: true,
    meaning: 'the queue does not support this operation',
  },
  InvalidMessageContents: { meaning: 'the body holds characters SQS does not allow' },
  InvalidParameterValue: {
    meaning: 'a parameter of the message is not valid (an attribute, a group or dedup id)',
  },
  InvalidAttributeValue: { meaning: 'an attribute of the message is not valid' },
  InvalidAttributeName: { meaning: 'an attribute name of the message is not valid' },
  MessageTooLong: { meaning: 'the message is over the queue\u2019s maximum message size' },
  // The sink keeps each request within the limits; if SQS counts differently, the batch is
  // halved (src/outcome/decide.ts) down to the message that is too large.
  BatchRequestTooLong: { meaning: 'the batch request is over the size limit' },
  'AWS.SimpleQueueService.BatchRequestTooLong': { meaning: 'the batch request is over the size limit' },
  TooManyEntriesInBatchRequest: { meaning: 'more than 10 entries in one batch request' },
  'AWS.SimpleQueueService.TooManyEntriesInBatchRequest': {
    meaning: 'more than 10 entries in one batch request',
  },
  InvalidBatchEntryId: { meaning: 'a batch entry id is not valid' },
  BatchEntryIdsNotDistinct: { meaning: 'two batch entries have the same id' },
};

interface SdkLikeError {
  name?: string;
  message?: string;
  code?: unknown;
  Code?: unknown;
  $fault?: unknown;
  $metadata?: { httpStatusCode?: number };
  cause?: unknown;
}

function* chain(e: unknown, depth = 0): Generator<SdkLikeError> {
  if (!e || typeof e !== 'object' || depth > 8) return;
  const a = e as SdkLikeError;
  yield a;
  yield* chain(a.cause, depth + 1);
}

/** `Code` may carry ";Sender" / ";Receiver" (the query-compatible header's form): the code is before it. */
function codeOf(v: unknown): string | undefined {
  if (typeof v !== 'string' || v === '') return undefined;
  return v.split(';')[0]!.replace(/^com\.amazonaws\.sqs#/, '');
}

export function classifySqsError(e: unknown): Classified {
  const message = e instanceof Error ? e.message : String(e);
  for (const a of chain(e)) {
    if (a instanceof SqsSinkError) {
      const c = SQS_SINK_CODES[a.code];
      if (a.code === 'ENTRY_REFUSED' && a.awsCode) {
        const p = PERMANENT_SQS_ERRORS[a.awsCode];
        if (p?.destinationWide)
          return { class: 'permanent', reason: a.awsCode, message, destinationWide: true };
      }
      return { class: c.permanent ? 'permanent' : 'transient', reason: a.awsCode ?? a.code, message };
    }
    for (const code of [codeOf(a.Code), codeOf(a.name)]) {
      const p = code ? PERMANENT_SQS_ERRORS[code] : undefined;
      if (p && code)
        return {
          class: 'permanent',
          reason: code,
          message: `${p.meaning}: ${message}`,
          ...(p.destinationWide ? { destinationWide: true } : {}),
        };
    }
  }
  let reason = 'UNKNOWN';
  for (const a of chain(e)) {
    const code = codeOf(a.code) ?? codeOf(a.Code) ?? (a.name && a.name !== 'Error' ? a.name : undefined);
    if (code) {
      reason = code;
      break;
    }
    const status = a.$metadata?.httpStatusCode;
    if (status !== undefined) {
      reason = `HTTP_${status}`;
      break;
    }
  }
  // Throttling (RequestThrottled, ThrottlingException, KmsThrottled), 5xx, Node's network errors
  // (ECONNREFUSED, ECONNRESET…), the SDK's TimeoutError and anything unknown.
  return { class: 'transient', reason, message };
}
