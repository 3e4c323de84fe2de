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

  /** The timeline the last stream started on (null before the first). */
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
    this.#changed(was, key);
  }

  /**
   * A TIMELINE_CHANGED error ended a session: its outcomes were dropped. Logged here; the change
   * itself is counted when a stream starts on the new timeline (observe), and `current` stays the
   * old one until then, so the relay knows a table pass is due (slot-opener.ts openSlot).
   */
  dropped(e: RelayError): void {
    if (!isRelayError(e)) return;
    const { from, to, events } = (e.details ?? {}) as { from?: string; to?: string; events?: number };
    if (!from || !to) return;
    this.#log.warn(
      { from, to, dropped: events ?? 0 },
      `the outcomes of ${events ?? 0} events observed on ${describeTimeline(from)} were dropped, not recorded: the database is now on ${describeTimeline(to)}`,
    );
  }

  #changed(from: string, to: string): void {
    this.#metrics.timelineChanges.inc();
    this.#log.warn(
      { from, to },
      `database timeline changed: ${describeTimeline(from)} → ${describeTimeline(to)} (a standby was promoted, or another database answers here): nothing observed on the old primary is recorded on the new one; the new primary's own progress record, slot or table recovery decides what is published (duplicates possible)`,
    );
  }
}
