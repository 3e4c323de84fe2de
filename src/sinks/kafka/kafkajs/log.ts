/**
 * kafkajs' own log lines, at the relay's levels (docs/logging.md says what each level means for
 * alerting). kafkajs logs every refused request and every failed connection at ERROR, although
 * the error also reaches the relay, which handles it and says so once in its own words:
 *  - a permanent refusal of an event (missing topic, ACL, too large) is recorded as the event's
 *    failure, one `warn` line per event (lifecycle/failure-policy.ts) → kafkajs' line is `debug`;
 *  - a broker that cannot be reached, or a transient refusal (leader moving, not enough
 *    replicas) is retried: kafkajs retries it, then the relay with back-off, and the outage is
 *    reported by the relay (`broker unavailable`, outbox_broker_outage) → kafkajs' line is `warn`;
 *  - the relay itself in trouble — its credentials refused (SASL authentication failed), a bug
 *    in a listener — stays `error`: nothing is published until someone acts.
 * Warnings stay warnings, except those that do not apply to the relay (NOT_APPLICABLE); INFO
 * and DEBUG are not passed on (the client logs at WARN).
 */
import { createRequire } from 'node:module';
import { logLevel } from 'kafkajs';
import type { Logger } from '../../../observability/logger.ts';
import { PERMANENT_KAFKA_TYPES } from '../kafka-errors.ts';

export type RelayLevel = 'error' | 'warn' | 'debug';

/**
 * kafkajs warnings that do not apply to the relay. kafkajs warns that limited retries "may
 * invalidate EoS guarantees" of an idempotent producer: the relay promises at-least-once, not
 * exactly-once, and its own loop re-sends a failed batch, in order, until the broker
 * acknowledges it (duplicates are deduplicated by event_id downstream).
 */
const NOT_APPLICABLE = [/^Limiting retries for the idempotent producer may invalidate EoS guarantees/];

/** The relay's own trouble: credentials refused, or a bug in code kafkajs called back. */
const RELAY_IN_TROUBLE = [/SASL .*authentication failed/i, /^Failed to execute listener/];

/**
 * kafkajs' messages of the Kafka errors the relay treats as a permanent refusal of an event
 * (sinks/kafka/kafka-errors.ts), as they appear in its log lines ("Response Produce(…)" with
 * `error: <message>`, "Failed to send messages: <message>"). Read from kafkajs' own table; if
 * that moves, none matches and such lines are `warn` (never `error`).
 */
const PERMANENT_MESSAGES: readonly string[] = (() => {
  try {
    const { errorCodes } = createRequire(import.meta.url)('kafkajs/src/protocol/error.js') as {
      errorCodes: { type: string; message: string }[];
    };
    return errorCodes.filter((e) => e.type in PERMANENT_KAFKA_TYPES).map((e) => e.message);
  } catch {
    return [];
  }
})();

/**
 * Transaction coordinator answers that mean "not now", which the relay retries itself
 * (kafkajs/send-messages.ts addPartitionsToTransaction, kafka-transactions.ts): CONCURRENT_TRANSACTIONS
 * follows nearly every commit of exactly-once delivery for a few ms → `debug`.
 */
const COORDINATOR_BUSY_MESSAGES: readonly string[] = (() => {
  try {
    const { errorCodes } = createRequire(import.meta.url)('kafkajs/src/protocol/error.js') as {
      errorCodes: { type: string; message: string }[];
    };
    const busy = new Set([
      'CONCURRENT_TRANSACTIONS',
      'GROUP_LOAD_IN_PROGRESS',
      'GROUP_COORDINATOR_NOT_AVAILABLE',
      'NOT_COORDINATOR_FOR_GROUP',
    ]);
    return errorCodes.filter((e) => busy.has(e.type)).map((e) => e.message);
  } catch {
    return [];
  }
})();

/** The relay's level for one kafkajs line. Pure: the table above, as a function. */
export function relayLevelOf(
  level: number,
  message: string,
  extra: Record<string, unknown> = {},
): RelayLevel {
  if (NOT_APPLICABLE.some((p) => p.test(message))) return 'debug';
  const error = typeof extra.error === 'string' ? extra.error : '';
  if (error && COORDINATOR_BUSY_MESSAGES.includes(error)) return 'debug';
  if (level !== logLevel.ERROR) return 'warn';
  if (RELAY_IN_TROUBLE.some((p) => p.test(message))) return 'error';
  const text = `${message} ${typeof extra.error === 'string' ? extra.error : ''}`;
  if (PERMANENT_MESSAGES.some((m) => text.includes(m))) return 'debug';
  return 'warn';
}

/** kafkajs' logCreator: its WARN and ERROR lines, at the relay's levels, under `component: kafkajs`. */
export function logCreator(log: Logger) {
  return () =>
    ({
      level,
      namespace,
      log: entry,
    }: {
      level: number;
      namespace?: string;
      log: { message: string } & Record<string, unknown>;
    }) => {
      if (level !== logLevel.ERROR && level !== logLevel.WARN) return;
      const { message, timestamp: _t, logger: _l, ...rest } = entry;
      const fields = namespace ? { namespace, ...rest } : rest;
      log[relayLevelOf(level, message, rest)](fields, `kafkajs: ${message}`);
    };
}
