import { ErrorCode, errorMessage, isRelayError } from '../errors.ts';
import { failureBackoff, formatError } from '../lifecycle/failure-policy.ts';
import type { FailedRow, StreamedRow } from '../lifecycle/outbox-store.ts';
import { Again, outagePolicy, retryUntilAborted } from '../retry/retry.ts';
import { codeOf, SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { currentTimeline, timelineChanged } from '../store/timeline.ts';
import { countBatch } from './count.ts';
import { decisionsDone } from './decide.ts';
import {
  type BatchItem,
  discardedAtOnce,
  type Outcome,
  type OutcomeDeps,
  PARKED,
  PUBLISHED,
} from './outcome.ts';

/** One outcome statement of a batch (see OutcomeRecorder.#write). */
interface OutcomeWrite<R extends StreamedRow> {
  what: string;
  rows: R[];
  write(rows: R[]): Promise<number>;
  /** For a row PostgreSQL refuses this outcome for good (54000): record it otherwise, with `why`. */
  unrecordable?(rows: R[], why: string): Promise<number>;
}

/**
 * Writes a decided batch's outcomes and counts them: the stream and lost-slot recovery record
 * through one of these. Failure outcomes (failed / parked) go on their rows first; then one
 * statement adds every id of the batch to the slot's progress record (lifecycle/progress.ts) —
 * the published ones and the failed ones alike, whose rows now show their own status, which
 * wins. On the happy path that is the batch's only statement.
 *
 * An outcome is settled only once it is durable (design.md §3): a row statement that matches
 * fewer rows than it names is not done — the rows may not be visible yet (design.md §7) — and is
 * repeated for the rows still 'pending' or still invisible, until each is written or has moved
 * on; the progress statement must report its one row.
 *
 * Outcomes never cross a timeline (store/timeline.ts): each statement is written only while the
 * server is on `on`, the timeline the batch was read from (the stream's IDENTIFY_SYSTEM, the
 * table pass's first read). A short count is first checked against the server's timeline: if it
 * changed — a retry that reached a promoted standby, whose reused ids name other rows — the
 * batch is dropped with TIMELINE_CHANGED, never retried there; its rows, if the new primary has
 * them, are left to the table recovery (a duplicate at most, never a loss).
 */
export class OutcomeRecorder {
  readonly #d: OutcomeDeps;
  /** Since when outcome statements have been waiting for rows to become visible; null = not waiting. */
  #invisibleSince: number | null = null;

  constructor(deps: OutcomeDeps) {
    this.#d = deps;
  }

  /**
   * Records the batch's outcomes, gives up or confirms its strict-ordering decisions, and counts
   * what was recorded. false = aborted: nothing of the batch is recorded as settled.
   */
  async record(
    batch: readonly BatchItem[],
    outcomes: readonly Outcome[],
    signal: AbortSignal,
    on: string,
  ): Promise<boolean> {
    const { config: c, store, log } = this.#d;
    const settled: StreamedRow[] = [];
    const parked: StreamedRow[] = [];
    const failed: (FailedRow & StreamedRow)[] = [];
    const discarded: (StreamedRow & { error: string })[] = [];
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i]!;
      const e = batch[i]!.message.event;
      settled.push(e); // an event is a StreamedRow (id, xid): no object per event on the happy path
      if (o === PARKED) parked.push({ id: e.id, xid: e.xid });
      else if (o === PUBLISHED) continue;
      else if (discardedAtOnce(o.failed))
        discarded.push({ id: e.id, xid: e.xid, error: formatError(o.failed) });
      else
        failed.push({ id: e.id, xid: e.xid, error: formatError(o.failed), retryInMs: failureBackoff(c, 1) });
    }
    // Failures first: the unlikely crash between statements then leaves a failed head, never
    // parked orphans; and both before the progress record covers their ids.
    const written =
      (await this.#write(
        {
          what: 'failed',
          rows: failed,
          write: (rows) => store.recordFailed(rows, on),
          unrecordable: (rows, why) =>
            store.recordUnrecordable(
              rows.map((r) => ({ id: r.id, error: `${r.error}; ${why}` })),
              on,
            ),
        },
        signal,
        on,
      )) &&
      (await this.#write(
        { what: 'discarded', rows: discarded, write: (rows) => store.recordUnrecordable(rows, on) },
        signal,
        on,
      )) &&
      (await this.#write(
        {
          what: 'parked',
          rows: parked,
          write: (rows) =>
            store.recordParked(
              rows.map((r) => r.id),
              on,
            ),
          unrecordable: (rows, why) =>
            store.recordUnrecordable(
              rows.map((r) => ({ id: r.id, error: `parked behind a failed event of its aggregate; ${why}` })),
              on,
            ),
        },
        signal,
        on,
      )) &&
      (await this.#write(
        {
          what: 'progress',
          rows: settled,
          // One row or none: none only on another timeline (the record is about ids, which need
          // not be visible yet), which #write finds out.
          write: async (rows) =>
            (await store.recordProgress(
              c.slot,
              rows.map((r) => r.id),
              on,
            )) === 1
              ? rows.length
              : 0,
        },
        signal,
        on,
      ));
    decisionsDone(this.#d, batch, outcomes);
    if (!written) return false;
    if (this.#invisibleSince !== null) {
      log.info(
        { waitedMs: Date.now() - this.#invisibleSince },
        'outbox rows are visible again; outcomes recorded',
      );
      this.#invisibleSince = null;
    }
    countBatch(this.#d, batch, outcomes);
    return true;
  }

  /**
   * Runs one outcome statement until every row it names is written or has moved on (see
   * OutboxStore.unwritten). Database errors and rows not visible yet are transient: back off
   * and repeat, never settle past them. false = aborted.
   *
   * One database error is permanent for a row: 54000 (program_limit_exceeded), a hostile row
   * whose aggregate columns are too long for the table's index of failed/dead/parked rows. The
   * batch is then written row by row, and a row PostgreSQL refuses on its own is recorded with
   * `unrecordable` (a status outside that index, with the reason) so the stream goes on.
   */
  async #write<R extends StreamedRow>(o: OutcomeWrite<R>, signal: AbortSignal, on: string): Promise<boolean> {
    const { config: c, store, metrics, outages, log } = this.#d;
    let todo = o.rows;
    if (todo.length === 0) return true;
    const done = await retryUntilAborted<boolean>(
      async () => {
        let n: number;
        try {
          n = await o.write(todo);
        } catch (e) {
          if (sqlStateOf(e) === SqlState.PROGRAM_LIMIT_EXCEEDED && o.unrecordable)
            return this.#unrecordable(o, todo, e, signal, on);
          throw e;
        }
        outages.recovered('database');
        if (n === todo.length) return true;
        if (n === 0) {
          // On a server of another timeline every outcome statement matches nothing.
          const now = await currentTimeline(store.db);
          if (now !== on) throw timelineChanged(on, now, todo.length);
          if (o.what === 'progress') throw new Error(`the progress record of slot ${c.slot} was not written`);
        }
        const still = new Set(await store.unwritten(todo));
        todo = todo.filter((r) => still.has(r.id));
        if (todo.length === 0) return true;
        metrics.transientErrors.inc({ dependency: 'database', reason: 'ROWS_NOT_VISIBLE' });
        if (this.#invisibleSince === null) {
          this.#invisibleSince = Date.now();
          log.warn(
            { rows: todo.length, outcome: o.what, ids: todo.slice(0, 10).map((r) => r.id) },
            `outbox rows the stream delivered are not visible yet (their commit is still in progress, e.g. waiting for a synchronous standby); their '${o.what}' outcome waits and the slot is not confirmed past them`,
          );
        }
        // Usually a window of microseconds: retry soon, but back off for a held commit.
        return new Again({ initialMs: 10, maxMs: Math.min(1000, c.retryMaxMs), factor: 2 });
      },
      {
        signal,
        policy: outagePolicy(c),
        onError: (e, attempt) => {
          // Waiting cannot bring the old timeline back: the session ends, the outcomes are dropped.
          if (isRelayError(e, ErrorCode.TIMELINE_CHANGED)) throw e;
          metrics.transientErrors.inc({ dependency: 'database', reason: codeOf(e) ?? 'UNKNOWN' });
          outages.failed('database', 'RECORD_OUTCOMES', errorMessage(e), { events: todo.length, attempt });
        },
      },
    );
    return done === true;
  }

  /** 54000: row by row; a row refused on its own is recorded 'discarded' with the reason. */
  async #unrecordable<R extends StreamedRow>(
    o: OutcomeWrite<R>,
    todo: R[],
    e: unknown,
    signal: AbortSignal,
    on: string,
  ): Promise<boolean> {
    if (todo.length > 1) {
      for (const r of todo) if (!(await this.#write({ ...o, rows: [r] }, signal, on))) return false;
      return true;
    }
    const why = `PostgreSQL cannot record it '${o.what}' (${errorMessage(e)}: its aggregate columns are too long for the index of failed, dead and parked rows), so it is recorded 'discarded'; if it should still be published, correct the row and re-insert it (\`outbox-relay replay --since <created_at> --event-id <event_id>\`)`;
    this.#d.log.error({ id: todo[0]!.id, outcome: o.what, err: errorMessage(e) }, why);
    const fallback = o.unrecordable!;
    return this.#write({ what: 'discarded', rows: todo, write: (rows) => fallback(rows, why) }, signal, on);
  }
}
