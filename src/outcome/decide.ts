import type { Classified } from '../errors.ts';
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
  // A refusal of a destination itself (a topic missing or not authorized, a subject no stream
  // takes, an exchange missing: the sink's error table says which) in a batch for several
  // destinations: each destination's events are sent together, so one missing topic costs one
  // more request per destination, not one per event of the batch (the soak measured a stream
  // stalled ~10 s per refused event, its backlog then sent one event at a time).
  if (all.destinationWide === true) {
    const groups = byDestinationIfAggregatesStay(batch, indexes, destinationOf(d));
    if (groups.length > 1) {
      for (const group of groups)
        if (!(await bisect(d, batch, group, outcomes, signal))) return givenUp(d, batch, outcomes);
      return outcomes;
    }
  }
  return (await bisect(d, batch, indexes, outcomes, signal, all)) ? outcomes : givenUp(d, batch, outcomes);
}

/** Aborted: the decisions taken so far are given up (decisionsDone); null for decideBatch. */
function givenUp(d: OutcomeDeps, batch: readonly BatchItem[], outcomes: Outcome[]): null {
  decisionsDone(d, batch, outcomes);
  return null;
}

/**
 * Decides `indexes` (consecutive in stream order): sent together (or `refused` already, when
 * that is how their publish together went); when refused for good, each half in turn, the first
 * wholly decided before the second is sent — a half that goes through holds no refused event; a
 * refused one is halved again, down to the single events that fail. One refused event among n
 * costs about 2·log2(n) publishes instead of n: in exactly-once mode each is a Kafka transaction,
 * and a transaction holds up to thousands of events. The events of an aggregate that failed
 * meanwhile are parked (strict ordering) before their half is sent. A refusal of the destination
 * itself (missing, not authorized: the sink's table says destinationWide) when the events are
 * all for that destination is every event's: they fail without being sent alone — each would be
 * refused the same way (a missing Kafka topic after ~1.4 s of kafkajs metadata retries each).
 * false = aborted.
 */
async function bisect(
  d: OutcomeDeps,
  batch: readonly BatchItem[],
  indexes: number[],
  outcomes: Outcome[],
  signal: AbortSignal,
  refused?: Classified,
): Promise<boolean> {
  const send = indexes.filter((i) => !park(d, batch, i, outcomes));
  if (send.length === 0) return true;
  // The refusal known is of exactly these events only if none was parked since.
  let result: true | Classified | null | undefined = send.length === indexes.length ? refused : undefined;
  result ??= await publishUntilDecided(
    d,
    send.map((i) => batch[i]!.message),
    signal,
  );
  if (result === null) return false;
  if (result === true) {
    for (const i of send) outcomes[i] = PUBLISHED;
    return true;
  }
  const destination = destinationOf(d);
  const first = destination(batch[send[0]!]!.message);
  if (
    send.length === 1 ||
    (result.destinationWide === true && send.every((i) => destination(batch[i]!.message) === first))
  ) {
    for (const i of send) if (!park(d, batch, i, outcomes)) fail(d, batch, i, outcomes, result);
    return true;
  }
  const mid = send.length >> 1;
  return (
    (await bisect(d, batch, send.slice(0, mid), outcomes, signal)) &&
    bisect(d, batch, send.slice(mid), outcomes, signal)
  );
}

/** Strict ordering: event i is parked (decided, not sent) when its aggregate is blocked. */
function park(d: OutcomeDeps, batch: readonly BatchItem[], i: number, outcomes: Outcome[]): boolean {
  if (d.config.ordering !== 'strict') return false;
  const e = batch[i]!.message.event;
  if (!d.blocked.has(e.aggregateType, e.aggregateId)) return false;
  outcomes[i] = PARKED;
  d.blocked.parkDecided(e.aggregateType, e.aggregateId);
  return true;
}

function fail(
  d: OutcomeDeps,
  batch: readonly BatchItem[],
  i: number,
  outcomes: Outcome[],
  why: Classified,
): void {
  outcomes[i] = { failed: why };
  const e = batch[i]!.message.event;
  if (d.config.ordering === 'strict') d.blocked.blockDecided(e.aggregateType, e.aggregateId);
}

/** What one destination-wide refusal covers: the sink's destination of a message (a Kafka topic by default). */
function destinationOf(d: OutcomeDeps): (m: OutboundMessage) => string {
  return d.sink.destinationOf?.bind(d.sink) ?? ((m: OutboundMessage) => m.topic);
}

/**
 * The batch's `indexes` grouped by destination (groups in order of first appearance, events in
 * batch order), or one group when an aggregate's events go to more than one destination (a
 * topic template with {event_type}): sent by destination, a later event of an aggregate could
 * then go out before an earlier one's failure is known.
 */
export function byDestinationIfAggregatesStay(
  batch: readonly BatchItem[],
  indexes: number[],
  destination: (m: OutboundMessage) => string = (m) => m.topic,
): number[][] {
  const groups = new Map<string, number[]>();
  const destinationOfAggregate = new Map<string, string>();
  for (const i of indexes) {
    const m = batch[i]!.message;
    const to = destination(m);
    const key = `${m.event.aggregateType}\u0000${m.event.aggregateId}`;
    const seen = destinationOfAggregate.get(key);
    if (seen !== undefined && seen !== to) return [indexes];
    destinationOfAggregate.set(key, to);
    let g = groups.get(to);
    if (!g) groups.set(to, (g = []));
    g.push(i);
  }
  return [...groups.values()];
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
