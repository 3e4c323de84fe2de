import type pg from 'pg';
import { isRelayError, type RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { missingTimelineColumn, readStoredTimeline, storeTimeline } from '../store/stored-timeline.ts';
import { currentTimeline, describeTimeline } from '../store/timeline.ts';

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
   * Whether the server's timeline `now` differs from the one the relay last knew: this process's
   * (a promotion while it ran), else `stored` — the key kept with the slot's progress record by
   * the last start (store/stored-timeline.ts; a promotion while no relay ran). A change known only
   * from the stored key is logged with both keys and counted here, once.
   */
  promotedSince(stored: string | null, now: string): boolean {
    if (this.#last !== null) return this.#last !== now;
    if (stored === null || stored === now) return false;
    this.#last = stored;
    this.#log.info({ timeline: stored }, `the slot's relay last started on ${describeTimeline(stored)}`);
    this.observe(now);
    return true;
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

/**
 * At each slot opening: the server's timeline, whether a promotion happened since the relay last
 * knew it (watch.promotedSince: in-process, or the key the last start stored with the progress
 * record), and `store()` to keep the server's key for the next start — called once the recovery
 * a promotion needs is marked, so a crash in between repeats the comparison, or the pass.
 * A progress table without the column (migrated before sql/000005): no stored key, said once.
 */
export async function startTimeline(
  db: pg.ClientBase,
  progress: string,
  slot: string,
  watch: TimelineWatch,
  log: Logger,
): Promise<{ promoted: boolean; now: string; store: () => Promise<void> }> {
  const now = await currentTimeline(db);
  const stored = await readStoredTimeline(db, progress, slot);
  if (stored.kind === 'absent' && !warnedAbsent.has(progress)) {
    warnedAbsent.add(progress);
    log.warn({ table: progress }, missingTimelineColumn(progress));
  }
  const promoted = watch.promotedSince(stored.kind === 'stored' ? stored.key : null, now);
  return {
    promoted,
    now,
    store: async () => {
      if (stored.kind === 'stored' && stored.key !== now) await storeTimeline(db, progress, slot, now);
    },
  };
}

const warnedAbsent = new Set<string>();
