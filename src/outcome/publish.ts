import { type Classified, isRelayError } from '../errors.ts';
import { Again, outagePolicy, retryUntilAborted } from '../retry/retry.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { OutcomeDeps } from './outcome.ts';

type PublishDeps = Pick<OutcomeDeps, 'sink' | 'metrics' | 'tracer'>;

/**
 * One publish attempt: true = the broker acknowledged every message; else the sink's
 * classification of the refusal (permanent or transient). Timed, and traced when a tracer is set.
 */
export async function publishOnce(d: PublishDeps, messages: OutboundMessage[]): Promise<true | Classified> {
  const startMs = Date.now();
  try {
    const t0 = performance.now();
    await d.sink.publish(messages);
    d.metrics.publishBatchSeconds.observe((performance.now() - t0) / 1000);
    d.tracer?.record({ messages, outcome: 'published', startMs, endMs: Date.now() });
    return true;
  } catch (e) {
    // The relay's own verdicts that no retry can change (a fenced exactly-once producer) end it.
    if (isRelayError(e) && !e.retriable) throw e;
    const cls = d.sink.classify(e);
    d.tracer?.record({ messages, outcome: 'failed', startMs, endMs: Date.now(), error: cls.reason });
    return cls;
  }
}

/**
 * Publishes until the broker decides: true = acknowledged; Classified = refused for good;
 * null = aborted. A transient failure (broker down, leader moving) is waited out with back-off,
 * forever: nothing behind it is confirmed meanwhile (design.md §4).
 */
export async function publishUntilDecided(
  d: Pick<OutcomeDeps, 'sink' | 'metrics' | 'tracer' | 'outages' | 'config'>,
  messages: OutboundMessage[],
  signal: AbortSignal,
): Promise<true | Classified | null> {
  const { metrics, outages } = d;
  // publishOnce throws only what no retry can change (exactly-once: fenced); it ends the relay.
  let fatal: { e: unknown } | null = null;
  const decided = await retryUntilAborted<true | Classified | null>(
    async (attempt) => {
      let r: true | Classified;
      try {
        r = await publishOnce(d, messages);
      } catch (e) {
        fatal = { e };
        return null;
      }
      if (r === true) {
        outages.recovered('broker');
        metrics.brokerOutage.set(0);
        return r;
      }
      if (r.class === 'permanent') return r;
      metrics.transientErrors.inc({ dependency: 'broker', reason: r.reason });
      metrics.brokerOutage.set(1);
      outages.failed('broker', r.reason, r.message, { events: messages.length, attempt });
      return new Again(undefined, r.retryAfterMs);
    },
    { signal, policy: outagePolicy(d.config) },
  );
  if (fatal) throw (fatal as { e: unknown }).e;
  return decided;
}
