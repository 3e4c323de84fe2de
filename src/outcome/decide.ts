import { hasAggregate } from '../lifecycle/blocked-aggregates.ts';
import type { OutboundMessage } from '../route/event.ts';
import {
  type BatchItem,
  discardedAtOnce,
  type Outcome,
  type OutcomeDeps,
  PARKED,
  PUBLISHED,
} from './outcome.ts';
import { publishUntilDecided } from './publish.ts';

/**
 * Decides every event of the batch, in order: published, failed (permanent for that event) or
 * parked (strict ordering, behind a failed event of its aggregate). Transient failures are
 * waited out. null = aborted (the decisions taken so far are given up: see decisionsDone).
 *
 * The decision is complete before the caller sends the next batch, so a later event of an
 * aggregate can never overtake the failure of an earlier one.
 */
export async function decideBatch(
  d: OutcomeDeps,
  batch: readonly BatchItem[],
  signal: AbortSignal,
): Promise<Outcome[] | null> {
  const { config: c, blocked } = d;
  const strict = c.ordering === 'strict';
  const outcomes: Outcome[] = new Array(batch.length);
  // Indexed loops: this runs once per batch, too seldom for V8 to optimize an iterator away.
  // toSend: the indexes sent — all of the batch (null) unless some event is decided before
  // sending (a blocked aggregate's, an unroutable row).
  let toSend: number[] | null = null;
  if (blocked.size > 0 || batch.some((p) => p.routeError !== undefined)) {
    toSend = [];
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      const e = p.message.event;
      if (strict && hasAggregate(e) && blocked.has(e.aggregateType, e.aggregateId)) {
        outcomes[i] = PARKED;
        blocked.parkDecided(e.aggregateType, e.aggregateId);
      } else if (p.routeError !== undefined) {
        outcomes[i] = { failed: p.routeError };
        if (strict && hasAggregate(e) && !discardedAtOnce(p.routeError))
          blocked.blockDecided(e.aggregateType, e.aggregateId);
      } else {
        toSend.push(i);
      }
    }
    if (toSend.length === 0) return outcomes;
  }
  const messages: OutboundMessage[] = new Array(toSend ? toSend.length : batch.length);
  for (let k = 0; k < messages.length; k++) messages[k] = batch[toSend ? toSend[k]! : k]!.message;
  const all = await publishUntilDecided(d, messages, signal);
  if (all === null) return null;
  if (all === true) {
    if (toSend) for (let k = 0; k < toSend.length; k++) outcomes[toSend[k]!] = PUBLISHED;
    else outcomes.fill(PUBLISHED);
    return outcomes;
  }
  const indexes = toSend ?? batch.map((_, i) => i);
  // Some event of the batch is refused for good: find which, one at a time and in order,
  // so strict ordering can park the later events of a failed aggregate before they go out.
  // A refusal of the destination itself (a topic missing or not authorized, a subject no stream
  // takes, an exchange missing: the sink's error table says which) in a batch for one destination
  // is every event's: sent one by one, each would be refused the same way (after ~1.4 s of
  // kafkajs metadata retries each, for Kafka).
  const destinationOf = d.sink.destinationOf?.bind(d.sink) ?? ((m: OutboundMessage) => m.topic);
  const destination = destinationOf(batch[indexes[0]!]!.message);
  const wide =
    all.destinationWide === true && indexes.every((i) => destinationOf(batch[i]!.message) === destination);
  for (const i of indexes) {
    const m = batch[i]!.message;
    const e = m.event;
    if (strict && blocked.has(e.aggregateType, e.aggregateId)) {
      outcomes[i] = PARKED;
      blocked.parkDecided(e.aggregateType, e.aggregateId);
      continue;
    }
    const one = wide ? all : await publishUntilDecided(d, [m], signal);
    if (one === null) {
      // Aborted mid-way: the decisions taken so far are never written.
      decisionsDone(d, batch, outcomes);
      return null;
    }
    if (one === true) outcomes[i] = PUBLISHED;
    else {
      outcomes[i] = { failed: one };
      if (strict) blocked.blockDecided(e.aggregateType, e.aggregateId);
    }
  }
  return outcomes;
}

/**
 * The strict-ordering decisions of a batch (parks, blocking failures) are written — or given
 * up with the session, whose successor reloads the blocked set from the table.
 */
export function decisionsDone(
  d: Pick<OutcomeDeps, 'config' | 'blocked'>,
  batch: readonly BatchItem[],
  outcomes: readonly (Outcome | undefined)[],
): void {
  const strict = d.config.ordering === 'strict';
  for (let i = 0; i < batch.length; i++) {
    const o = outcomes[i];
    const e = batch[i]!.message.event;
    const blocking =
      o === PARKED || (strict && o !== undefined && o !== PUBLISHED && !discardedAtOnce(o.failed));
    if (hasAggregate(e) && blocking) d.blocked.written(e.aggregateType, e.aggregateId);
  }
}
