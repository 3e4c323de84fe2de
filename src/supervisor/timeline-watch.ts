import { isRelayError, type RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { describeTimeline } from '../store/timeline.ts';

/**
 * The database timeline the relay last saw (store/timeline.ts), and what happens when it changes
 * — a standby promoted behind the relay's address. Seen at each stream's start (IDENTIFY_SYSTEM)
 * and in TIMELINE_CHANGED errors (an outcome write that reached the new primary). What is keyed
 * by id is rebuilt from the new primary's own state by the next round of the relay's loop, never
 * carried over: the progress record and the rows on them are read again, the blocked aggregates
 * reloaded, Kafka's exactly-once record of another timeline ignored (relay.ts), and outcomes not
 * yet recorded are dropped (outcome/record.ts). The lost slot (PostgreSQL ≤ 16, or 17+ without a
 * synced failover slot) is recovered from the table: every row the new primary has not recorded
 * is published again — duplicates possible, losses not.
 */
export class TimelineWatch {
  readonly #log: Logger;
  readonly #metrics: RelayMetrics;
  #last: string | null = null;

  constructor(log: Logger, metrics: RelayMetrics) {
    this.#log = log;
    this.#metrics = metrics;
  }

  get current(): string | null {
    return this.#last;
  }

  /** A stream started on `key`; logs and counts a change. */
  observe(key: string): void {
    const was = this.#last;
    this.#last = key;
    if (was === null || was === key) {
      if (was === null) this.#log.info({ timeline: key }, `database on ${describeTimeline(key)}`);
      return;
    }
    this.#changed(was, key, null);
  }

  /** A TIMELINE_CHANGED error ended a session: its outcomes were dropped. */
  dropped(e: RelayError): void {
    if (!isRelayError(e)) return;
    const { from, to, events } = (e.details ?? {}) as { from?: string; to?: string; events?: number };
    if (!from || !to) return;
    const was = this.#last ?? from;
    this.#last = to;
    this.#changed(was, to, events ?? 0);
  }

  #changed(from: string, to: string, dropped: number | null): void {
    this.#metrics.timelineChanges.inc();
    this.#log.warn(
      { from, to, dropped },
      `database timeline changed: ${describeTimeline(from)} → ${describeTimeline(to)} (a standby was promoted, or another database answers here)` +
        (dropped === null
          ? ''
          : `; the outcomes of ${dropped} events observed on the old one were dropped, not recorded`) +
        ": nothing observed on the old primary is recorded on the new one; the new primary's own progress record, slot or table recovery decides what is published (duplicates possible)",
    );
  }
}
