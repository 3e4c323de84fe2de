/**
 * Classifies a kafkajs error (design.md §4, seed 004). Pure and table-driven.
 * Permanent: retrying the same message cannot succeed until someone changes the
 * topic, the ACLs or the message. Everything else (and anything unknown) is
 * transient: stall, back off, retry, never confirm past it.
 */
import type { Classified, ErrorClass } from '../../errors.ts';

// The shared classification lives in errors.ts (the lifecycle and other sinks use it too);
// re-exported for this folder's files. reason here: a Kafka error type or kafkajs error name.
export type { Classified, ErrorClass };

/** Kafka protocol error types that are permanent for the event that hit them. */
export const PERMANENT_KAFKA_TYPES: Readonly<Record<string, string>> = {
  UNKNOWN_TOPIC_OR_PARTITION: 'topic does not exist (and auto-creation is off)',
  INVALID_TOPIC_EXCEPTION: 'invalid topic name',
  TOPIC_AUTHORIZATION_FAILED: 'not authorized to write to the topic',
  MESSAGE_TOO_LARGE:
    'message larger than the broker or topic accepts (message.max.bytes / max.message.bytes)',
  RECORD_LIST_TOO_LARGE: 'batch larger than the broker accepts',
  INVALID_RECORD: 'the broker refused the record as invalid',
  CORRUPT_MESSAGE: 'the broker found the record corrupt',
  INVALID_REQUIRED_ACKS: 'invalid acks setting',
  UNSUPPORTED_FOR_MESSAGE_FORMAT: 'the topic’s message format does not support this record',
  POLICY_VIOLATION: 'a broker policy refused the record',
};

/**
 * Permanent refusals of a topic as a whole (its metadata, its ACL): every event of a batch for
 * that one topic gets the same answer, so the stream records them all without sending each alone
 * (Classified.destinationWide).
 */
export const TOPIC_LEVEL_KAFKA_TYPES: ReadonlySet<string> = new Set([
  'UNKNOWN_TOPIC_OR_PARTITION',
  'INVALID_TOPIC_EXCEPTION',
  'TOPIC_AUTHORIZATION_FAILED',
  'KafkaJSInvalidTopicName',
]);

/**
 * Kafka error types that say this producer's idempotence state (producer id, epoch, sequence
 * numbers) no longer matches the broker's. Transient for the events — the same batch from a new
 * producer is accepted — but fatal for the producer: every later send of it fails the same way
 * (design.md §7), so the sink replaces it.
 */
export const PRODUCER_STATE_KAFKA_TYPES: Readonly<Record<string, string>> = {
  OUT_OF_ORDER_SEQUENCE_NUMBER: "the producer's sequence numbers are out of step with the broker's",
  DUPLICATE_SEQUENCE_NUMBER: "the producer's sequence numbers are out of step with the broker's",
  INVALID_PRODUCER_EPOCH: 'the producer was fenced (its epoch is stale)',
  UNKNOWN_PRODUCER_ID: 'the broker no longer knows this producer id',
  INVALID_PRODUCER_ID_MAPPING: 'the broker no longer knows this producer id',
};

/** kafkajs error names that are permanent regardless of a Kafka code. */
const PERMANENT_KAFKAJS_NAMES: Readonly<Record<string, string>> = {
  KafkaJSInvalidTopicName: 'invalid topic name',
};

interface KafkaLikeError {
  name?: string;
  type?: string;
  code?: number;
  message?: string;
  cause?: unknown;
  originalError?: unknown;
  errors?: unknown[];
}

/** Walks .cause, .originalError and aggregated .errors depth-first. */
function* chain(e: unknown, depth = 0): Generator<KafkaLikeError> {
  if (!e || typeof e !== 'object' || depth > 8) return;
  const k = e as KafkaLikeError;
  yield k;
  yield* chain(k.cause, depth + 1);
  yield* chain(k.originalError, depth + 1);
  if (Array.isArray(k.errors)) for (const x of k.errors) yield* chain(x, depth + 1);
}

/**
 * kafkajs 2.2.4's plain Error for a request on a broker it holds "connected" without request
 * versions (src/broker/index.js, `notInitializedLookup`): its first ApiVersions request failed on
 * a socket that stayed open (a broker frozen, or restarting, at that moment). kafkajs never asks
 * again: every request to that broker fails so, without going out, until the broker closes the
 * idle socket (connections.max.idle.ms, 10 minutes by default). A new producer connects afresh.
 * `kafka-errors.test.ts` checks that the installed kafkajs still throws this text.
 */
export const HALF_CONNECTED_BROKER = 'Broker not connected';

/**
 * Whether the producer that raised `e` must be replaced before the next send, by what the
 * error means for the producer rather than for the event:
 * - a producer-state error (table above);
 * - a broker kafkajs holds half-connected (HALF_CONNECTED_BROKER): the request never went out, so
 *   nothing is sent twice;
 * - any permanent refusal: the broker may have stored the other partitions of the same
 *   request, and kafkajs rolls back the sequence numbers of every partition of a failed
 *   request — the next send to a stored partition would get OUT_OF_ORDER_SEQUENCE_NUMBER for
 *   ever. A new producer (new id, fresh sequences) sends them again: duplicates, no wedge.
 * Transient errors keep the producer: kafkajs and the relay resend the same batch, which the
 * broker deduplicates by sequence number.
 */
export function breaksProducer(e: unknown): boolean {
  for (const k of chain(e)) {
    if (k.type && PRODUCER_STATE_KAFKA_TYPES[k.type]) return true;
    if (k.message === HALF_CONNECTED_BROKER && k.type === undefined) return true;
  }
  return classifyKafkaError(e).class === 'permanent';
}

/**
 * Whether `e` says a newer producer with the same transactional id exists (exactly-once): the
 * coordinator bumped the epoch (INVALID_PRODUCER_EPOCH, 47) or fenced it (PRODUCER_FENCED, 90,
 * which kafkajs 2.2.4 does not know by name). For a transactional producer this is never
 * retried: another relay owns the slot's transactions now.
 */
export function isFenced(e: unknown): boolean {
  for (const k of chain(e)) {
    if (k.type === 'INVALID_PRODUCER_EPOCH' || k.type === 'PRODUCER_FENCED') return true;
    if (k.type === 'KAFKAJS_UNKNOWN_ERROR_CODE' && /\bcode 90\b/.test(k.message ?? '')) return true;
  }
  return false;
}

/**
 * Refusals of the relay's principal rather than of an event: every event would meet them, so
 * none is failed for them — transient, with the fix in the message.
 */
export const PRINCIPAL_KAFKA_TYPES: Readonly<Record<string, string>> = {
  KafkaJSSASLAuthenticationError:
    "the brokers refused the relay's credentials (SASL): check the --kafka-sasl-* options; for oauthbearer the token's signature, expiry, audience and issuer as the brokers validate them — nothing is failed meanwhile",
  SASL_AUTHENTICATION_FAILED:
    "the brokers refused the relay's credentials (SASL): check the --kafka-sasl-* options; for oauthbearer the token's signature, expiry, audience and issuer as the brokers validate them — nothing is failed meanwhile",
  CLUSTER_AUTHORIZATION_FAILED:
    "the relay's principal may not produce at all (an idempotent producer needs Write on a topic or IdempotentWrite on the cluster); grant it — nothing is failed meanwhile",
};

const topicLevel = (reason: string): Pick<Classified, 'destinationWide'> =>
  TOPIC_LEVEL_KAFKA_TYPES.has(reason) ? { destinationWide: true } : {};

export function classifyKafkaError(e: unknown): Classified {
  const message = e instanceof Error ? e.message : String(e);
  for (const k of chain(e)) {
    if (k.type && PERMANENT_KAFKA_TYPES[k.type]) {
      return {
        class: 'permanent',
        reason: k.type,
        message: `${PERMANENT_KAFKA_TYPES[k.type]}: ${k.message ?? message}`,
        ...topicLevel(k.type),
      };
    }
    if (k.name && PERMANENT_KAFKAJS_NAMES[k.name]) {
      return {
        class: 'permanent',
        reason: k.name,
        message: `${PERMANENT_KAFKAJS_NAMES[k.name]}: ${k.message ?? message}`,
        ...topicLevel(k.name),
      };
    }
  }
  let reason = 'UNKNOWN';
  for (const k of chain(e)) {
    if (k.type) {
      reason = k.type;
      break;
    }
    if (k.name && k.name !== 'Error') reason = k.name;
  }
  const principal = PRINCIPAL_KAFKA_TYPES[reason];
  if (principal) return { class: 'transient', reason, message: `${principal}: ${message}` };
  const producerState = PRODUCER_STATE_KAFKA_TYPES[reason];
  if (producerState)
    return {
      class: 'transient',
      reason,
      message: `${producerState}; a new producer sends it again: ${message}`,
    };
  return { class: 'transient', reason, message };
}
