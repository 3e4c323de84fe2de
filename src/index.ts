/**
 * The package's library entry (`import … from 'pg-outbox-relay'`): the application side of the
 * pattern. Producers write events with their business change; consumers process each event once.
 * The relay itself is the `outbox-relay` CLI.
 */

export {
  type Envelope,
  EnvelopeSchema,
  file_outbox_v1_envelope,
} from './gen/outbox/v1/envelope_pb.ts';
export { toEnvelope } from './route/envelope-value.ts';
export type { OutboxEvent } from './route/event.ts';
export { HEADER } from './route/router.ts';
export {
  ENVELOPE_JSON_CONTENT_TYPE,
  ENVELOPE_PROTOBUF_CONTENT_TYPE,
  type EncodedValue,
  encodeValue,
  isValueFormat,
  VALUE_FORMATS,
  type ValueFormat,
  valueFormatFor,
} from './route/value-format.ts';
export { InboxError, OutboxTransactionError, OutboxValidationError } from './sdk/errors.ts';
export type { OutboxEventInput, ProtobufPayload } from './sdk/event-input.ts';
export {
  createInbox,
  type Inbox,
  type InboxKey,
  type InboxOptions,
  type KafkaEachMessageOptions,
  type ProcessResult,
} from './sdk/inbox.ts';
export { type InboxMessage, toInboxMessage } from './sdk/inbox-message.ts';
export {
  createOutbox,
  type EnqueuedEvent,
  MAX_ROWS_PER_INSERT,
  type Outbox,
  type OutboxOptions,
} from './sdk/producer.ts';
export type { SqlExecutor } from './sdk/sql-executor.ts';
export { uuidV7Time, uuidv7 } from './sdk/uuid-v7.ts';
