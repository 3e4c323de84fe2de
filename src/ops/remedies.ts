import { LAST_ERROR_PREFIX } from '../lifecycle/failure-policy.ts';
import { HTTP_SINK_CODES } from '../sinks/http/http-errors.ts';
import { PERMANENT_KAFKA_TYPES } from '../sinks/kafka/kafka-errors.ts';
import { PERMANENT_REPLY_CODES, REDIS_SINK_CODES } from '../sinks/redis/redis-errors.ts';
import { PERMANENT_SQS_ERRORS, SQS_SINK_CODES } from '../sinks/sqs/sqs-errors.ts';

/**
 * What to do about an event the broker (or the router) refused, by the reason recorded in its
 * last_error (`permanent/UNKNOWN_TOPIC_OR_PARTITION: …`, written by lifecycle/failure-policy.ts).
 * Pure. The cause of each Kafka type is the classification table's own words
 * (sinks/kafka/kafka-errors.ts); this table adds only the fix, so the two are written once each. A test
 * checks that every permanent Kafka type has a fix here.
 */
export interface Remedy {
  /** e.g. UNKNOWN_TOPIC_OR_PARTITION; null when last_error names none. */
  reason: string | null;
  /** What went wrong, in the classification table's words (null: unknown reason). */
  cause: string | null;
  /** What the operator does, naming the topic; then resend the events (`events resend`). */
  fix: string;
}

const TOPICS_CMD = 'kafka-topics.sh --bootstrap-server <brokers>';

const FIXES: Readonly<Record<string, (topic: string) => string>> = {
  UNKNOWN_TOPIC_OR_PARTITION: (t) =>
    `create the topic: ${TOPICS_CMD} --create --topic ${t} --partitions 3 (auto-creation is off), or route the aggregate type to an existing topic (--topic-override)`,
  INVALID_TOPIC_EXCEPTION: (t) =>
    `the topic name ${t} is not legal for the broker: fix --topic-template or --topic-override`,
  KafkaJSInvalidTopicName: (t) =>
    `the topic name ${t} is not legal: fix --topic-template or --topic-override`,
  TOPIC_AUTHORIZATION_FAILED: (t) =>
    `grant the relay's principal Write and Describe on the topic: kafka-acls.sh --bootstrap-server <brokers> --add --allow-principal User:<relay> --operation Write --operation Describe --topic ${t}`,
  MESSAGE_TOO_LARGE: (t) =>
    `raise the topic's max.message.bytes (kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics --entity-name ${t} --add-config max.message.bytes=<bytes>) and, above the broker's message.max.bytes, that too — or write smaller payloads`,
  RECORD_LIST_TOO_LARGE: (t) =>
    `raise the broker's message.max.bytes (or the topic's max.message.bytes: kafka-configs.sh --alter --entity-type topics --entity-name ${t} --add-config max.message.bytes=<bytes>), or lower the relay's --batch-bytes`,
  INVALID_RECORD: (t) =>
    `the broker of ${t} refused the record (e.g. a compacted topic needs a key): read the broker's log and fix the row or the topic's configuration`,
  CORRUPT_MESSAGE: () => 'the broker found the record corrupt: read its log; resend once the cause is fixed',
  INVALID_REQUIRED_ACKS: () =>
    "the broker refused the relay's acks setting (the relay always asks for acks=all): check the broker's version and configuration",
  UNSUPPORTED_FOR_MESSAGE_FORMAT: (t) =>
    `the message format of ${t} is too old for this record (headers need message format v2): upgrade the topic's message.format.version`,
  POLICY_VIOLATION: (t) =>
    `a broker policy refused the record for ${t}: ask the cluster's administrators which policy, and fix the row or the policy`,
};

/**
 * Redis Streams (sinks/redis/redis-errors.ts): the stream is the topic unless
 * --redis-stream-template says otherwise, which the fix mentions.
 */
const REDIS_FIXES: Readonly<Record<string, { cause: string; fix: (stream: string) => string }>> = {
  WRONGTYPE: {
    cause: PERMANENT_REPLY_CODES.WRONGTYPE!.why,
    fix: (t) =>
      `the key ${t} (or the stream --redis-stream-template makes of it) is not a stream: see redis-cli TYPE ${t}; rename or delete that key (RENAME, UNLINK), or change --redis-stream-template`,
  },
  VALUE_TOO_LARGE: {
    cause: REDIS_SINK_CODES.VALUE_TOO_LARGE.meaning,
    fix: () =>
      "raise the server's proto-max-bulk-len (CONFIG SET proto-max-bulk-len <bytes>, and in redis.conf), or write smaller payloads",
  },
  TOO_MANY_FIELDS: {
    cause: REDIS_SINK_CODES.TOO_MANY_FIELDS.meaning,
    fix: () =>
      'put fewer headers on the row (at most ~3,890: move the rest into the payload), then `outbox-relay events resend <id>`',
  },
  INVALID_STREAM: {
    cause: REDIS_SINK_CODES.INVALID_STREAM.meaning,
    fix: () => 'fix --redis-stream-template (or --topic-template) so that every event has a stream name',
  },
};

/** SQS (sinks/sqs/sqs-errors.ts): the queue is the one --sqs-queue-url-template names for the topic. */
const SQS_FIXES: Readonly<Record<string, (topic: string) => string>> = {
  QueueDoesNotExist: (t) =>
    `create the SQS queue --sqs-queue-url-template names for topic ${t} (aws sqs create-queue; a .fifo name with FifoQueue=true), or fix the template`,
  AccessDenied: (t) =>
    `allow the relay's IAM role sqs:SendMessage on the queue of topic ${t} (its policy or the role's), and kms:GenerateDataKey on its KMS key if encrypted`,
  SQS_MESSAGE_TOO_LARGE: () =>
    "raise --sqs-max-message-bytes up to the queues' MaximumMessageSize, or write smaller payloads (store them elsewhere and send a reference)",
  SQS_INVALID_MESSAGE: () =>
    'an SQS body must be non-empty UTF-8 text: write the payload as text (JSON), or no tombstones to an SQS sink',
  InvalidMessageContents: () =>
    'the body holds characters SQS forbids (most control characters): fix the row, or encode the payload',
};

/**
 * Webhooks (sinks/http/http-errors.ts): a receiver that answered records `HTTP_<status>`; the
 * fix depends on the status' class. The URL is the one --http-url makes of the topic.
 */
const HTTP_STATUS_FIXES: readonly {
  test: (status: number) => boolean;
  cause: string;
  fix: (t: string) => string;
}[] = [
  {
    test: (s) => s >= 300 && s < 400,
    cause: HTTP_SINK_CODES.REDIRECT.meaning,
    fix: (t) =>
      `point --http-url at the address the receiver redirects to (the Location in the error; redirects are never followed, so a signature never leaves for another host) for topic ${t}`,
  },
  {
    test: (s) => s === 401 || s === 403,
    cause: "the receiver did not accept the request's credentials or signature",
    fix: (t) =>
      `check that the receiver of topic ${t} verifies with the secret the relay signs with (--http-secret-file, WEBHOOK_SECRET; during a rotation give both secrets) and that it lets the relay's address in`,
  },
  {
    test: (s) => s === 404 || s === 405 || s === 410,
    cause: 'the receiver has no endpoint at this URL (or it does not take POST)',
    fix: (t) =>
      `fix --http-url (the path the template makes of topic ${t}), or add the endpoint to the receiver`,
  },
  {
    test: (s) => s === 413,
    cause: 'the receiver refused the body as too large',
    fix: () =>
      "raise the receiver's body limit, lower --http-batch-size (one event per request: 1), or write smaller payloads",
  },
  {
    test: () => true,
    cause: HTTP_SINK_CODES.REFUSED.meaning,
    fix: (t) =>
      `the receiver of topic ${t} refused the event as it is (its answer is in the error): fix the receiver or the row`,
  },
];

function httpRemedy(reason: string, topic: string): Remedy | null {
  if (reason === 'INVALID_EVENT')
    return {
      reason,
      cause: HTTP_SINK_CODES.INVALID_EVENT.meaning,
      fix: 'fix the row: a header value with a line break or control character, or a header name HTTP cannot carry (docs/sinks.md, Webhooks)',
    };
  const m = /^HTTP_(\d{3})$/.exec(reason);
  if (!m) return null;
  const f = HTTP_STATUS_FIXES.find((x) => x.test(Number(m[1])))!;
  return { reason, cause: f.cause, fix: f.fix(topic) };
}

/** Rows the router could not turn into a message (route/router.ts): the row itself must change. */
const ROW_FIX =
  'fix the row (the error names the column; docs/outbox-table.md#rows-that-break-the-contract) or discard it';
const ROW_REASONS: Readonly<Record<string, string>> = {
  ROUTE: 'no legal topic for the row',
  ROW_INVALID: "a column's value breaks the outbox table's contract",
  ROW_UNEXPECTED: 'the row could not be encoded',
};

const REASON_PREFIX = new RegExp(LAST_ERROR_PREFIX);

/** The reason of a last_error (`class/REASON: …`), or null. */
export function reasonOf(lastError: string | null): string | null {
  const m = lastError ? REASON_PREFIX.exec(lastError) : null;
  return m ? m[0].slice(m[0].indexOf('/') + 1, -1) : null;
}

/** The remedy for a reason (reasonOf(last_error)) of an event routed to `topic`. */
export function remedyFor(reason: string | null, topic: string): Remedy {
  const kafka = reason ? FIXES[reason] : undefined;
  if (reason && kafka)
    return { reason, cause: PERMANENT_KAFKA_TYPES[reason] ?? 'invalid topic name', fix: kafka(topic) };
  const sqs = reason ? SQS_FIXES[reason] : undefined;
  if (reason && sqs)
    return {
      reason,
      cause:
        PERMANENT_SQS_ERRORS[reason]?.meaning ??
        SQS_SINK_CODES[reason as keyof typeof SQS_SINK_CODES]?.meaning ??
        null,
      fix: sqs(topic),
    };
  if (reason && ROW_REASONS[reason]) return { reason, cause: ROW_REASONS[reason], fix: ROW_FIX };
  const redis = reason ? REDIS_FIXES[reason] : undefined;
  if (reason && redis) return { reason, cause: redis.cause, fix: redis.fix(topic) };
  const http = reason ? httpRemedy(reason, topic) : null;
  if (http) return http;
  return {
    reason,
    cause: null,
    fix: 'read the error above and the relay log (field event_id); fix the cause',
  };
}

/** Kafka types the table covers, for its test: every permanent one must have a fix. */
export const REMEDIED_KAFKA_TYPES: readonly string[] = Object.keys(FIXES);
