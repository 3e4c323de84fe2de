/**
 * Errors of the application-side SDK (producer and inbox). They are programming or usage errors of
 * the calling code, not relay errors: each message says what to change.
 */

/** An event the producer refuses before touching the database; `field` names the offending input. */
export class OutboxValidationError extends Error {
  override name = 'OutboxValidationError';
  /** The event field at fault, e.g. "aggregateId", "payload", "headers.tenant"; with enqueueMany prefixed "events[3].". */
  readonly field: string;
  /** The message without the field name. */
  readonly detail: string;

  constructor(field: string, detail: string) {
    super(`${field}: ${detail}`);
    this.field = field;
    this.detail = detail;
  }
}

/** The executor is not in a usable transaction, so the event would not commit with the business change. */
export class OutboxTransactionError extends Error {
  override name = 'OutboxTransactionError';
}

/** Misuse of the consumer inbox, or a message it cannot deduplicate. */
export class InboxError extends Error {
  override name = 'InboxError';
}
