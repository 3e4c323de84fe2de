import type { OutboundMessage } from '../route/event.ts';

/** The header a replayed row carries (src/ops/replay.ts): a replay is a new message, not a re-send. */
const REPLAY_HEADER = 'x-replay-of';
/** The header the dead-letter copy of an event carries (src/sweeper/dead-letter.ts). */
const DEAD_LETTER_HEADER = 'x-dlq-original-topic';

/**
 * The id a destination's deduplication knows a message by (NATS' Nats-Msg-Id, the Redis sink's
 * dedup key, SQS FIFO's MessageDeduplicationId): the event id. A replay (a new row copying an old event) and a dead-letter copy get
 * ids of their own, so they are not dropped as re-sends of the original.
 */
export function dedupId(m: OutboundMessage): string {
  const e = m.event;
  if (m.headers[DEAD_LETTER_HEADER] !== undefined) return `${e.eventId}:dead-letter`;
  return e.headers[REPLAY_HEADER] === undefined ? e.eventId : `${e.eventId}:${e.id}`;
}
