import type { Config } from '../config/load.ts';
import type { DeliveryMode } from '../delivery/mode.ts';
import { complement, parseIdRanges } from '../lifecycle/id-ranges.ts';
import type { StoredRow } from '../lifecycle/outbox-row.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { readPublished } from '../lifecycle/progress.ts';
import { pendingRowsBetween } from '../lifecycle/queries.ts';
import { decideBatch } from '../outcome/decide.ts';
import { type OutcomeDeps, PARKED, PUBLISHED, routeItem } from '../outcome/outcome.ts';
import { OutcomeRecorder } from '../outcome/record.ts';
import { parseSlotList } from '../replication/failover-readiness.ts';
import { sleep } from '../retry/backoff.ts';
import { rowToEvent } from '../route/outbox-row.ts';
import { type RouteConfig, routeConfigOf } from '../route/router.ts';
import { currentTimeline } from '../store/timeline.ts';

export interface RecoveryDeps extends OutcomeDeps {
  config: Config;
  store: OutboxStore;
  /** The delivery mode's headers for what it does not cover (exactly-once: this pass is at-least-once). */
  delivery: Pick<DeliveryMode, 'retryHeaders'>;
}

export interface RecoveryResult {
  /** Rows published from the table (some may have reached the broker before the loss: duplicates). */
  published: number;
  failed: number;
  parked: number;
  firstId: string | null;
  lastId: string | null;
}

/** Rows per table batch. */
const BATCH = 500;

/**
 * A lost slot's gap, published from the table (docs/operations.md#lost-slot). Runs after the NEW
 * slot exists and before streaming from it:
 *
 *  - every row committed before the new slot's consistent point is visible now (creating a
 *    logical slot waits for the transactions running at its start), and every row committed
 *    after it will come through the new slot — so the rows the lost slot may have missed are
 *    exactly the rows visible in the table that no progress record covers (truthful status
 *    'pending'); failed / parked / dead / discarded rows belong to the sweeper and operators;
 *  - they are published in id order (so in order per aggregate), in batches, each batch decided
 *    and recorded by the stream's own outcome code (outcome/): failures on the row first (54000
 *    falls back to 'discarded', as in the stream), then the batch's ids in the progress record;
 *  - strict ordering holds: an aggregate blocked by a failed event parks its later rows;
 *  - the stream then skips every row the progress record covers (session.ts), so rows committed
 *    after the new slot's start that this pass already published are not sent twice.
 *
 * Duplicates: rows the old slot had published but not yet recorded when it was lost (at most the
 * in-flight rows). Nothing is confirmed on the new slot until the pass is done.
 */
export async function publishUnrecorded(
  d: RecoveryDeps,
  signal: AbortSignal,
): Promise<RecoveryResult | null> {
  const route = routeConfigOf(d.config);
  const recorder = new OutcomeRecorder(d);
  // Read before the rows: outcomes of rows read on this timeline are recorded only on it.
  const on = await currentTimeline(d.store.db);
  const result: RecoveryResult = { published: 0, failed: 0, parked: 0, firstId: null, lastId: null };
  const recorded = await readPublished(d.store.db, d.store.progress);
  for (const [lo, hi] of complement(parseIdRanges(recorded))) {
    let from = lo;
    for (;;) {
      if (signal.aborted) return null;
      const rows = await pendingRowsBetween(d.store.db, d.store.table, from, hi, BATCH);
      if (rows.length === 0) break;
      if (!(await standbysHaveRead(d, signal))) return null;
      if (!(await settleBatch(d, recorder, route, rows, result, signal, on))) return null;
      from = BigInt(rows[rows.length - 1]!.id) + 1n;
      result.firstId ??= rows[0]!.id;
      result.lastId = rows[rows.length - 1]!.id;
      if (rows.length < BATCH) break;
    }
  }
  return result;
}

/**
 * PostgreSQL 17+ with synchronized_standby_slots: decoding sends a transaction only once the named
 * standbys have its WAL, so that none of its events becomes a phantom at a failover. The pass reads
 * the table directly: it waits the same way — until every named standby's slot has confirmed the
 * WAL up to the position taken after the batch was read (everything the batch holds committed
 * before it) — then publishes. Nothing to wait for without the setting (or before 17). false =
 * stopped meanwhile.
 */
async function standbysHaveRead(d: RecoveryDeps, signal: AbortSignal): Promise<boolean> {
  const db = d.store.db;
  const r = await db.query<{ named: string | null; lsn: string }>(
    "SELECT current_setting('synchronized_standby_slots', true) AS named, pg_current_wal_lsn()::text AS lsn",
  );
  const names = parseSlotList(r.rows[0]!.named);
  if (names.length === 0) return true;
  const lsn = r.rows[0]!.lsn;
  const since = Date.now();
  let said = false;
  while (!signal.aborted) {
    const caught = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_replication_slots
        WHERE slot_name = ANY($1) AND restart_lsn >= $2::pg_lsn AND wal_status IS DISTINCT FROM 'lost'`,
      [names, lsn],
    );
    if (caught.rows[0]!.n === names.length) {
      if (said) d.log.info({ lsn }, 'the standbys confirmed the WAL: the table pass goes on');
      return true;
    }
    if (!said && Date.now() - since >= 5_000) {
      said = true;
      d.log.warn(
        { synchronized_standby_slots: names, lsn },
        `the table pass waits until the standbys of synchronized_standby_slots (${names.join(', ')}) have confirmed the WAL up to ${lsn} before it publishes (as decoding waits for them: an event of a transaction they do not have would be a phantom at a failover)`,
      );
    }
    await sleep(100, signal);
  }
  return false;
}

/** Decides and records one batch of rows as the stream does (outcome/); false = aborted. */
async function settleBatch(
  d: RecoveryDeps,
  recorder: OutcomeRecorder,
  route: RouteConfig,
  rows: StoredRow[],
  result: RecoveryResult,
  signal: AbortSignal,
  on: string,
): Promise<boolean> {
  const items = rows.map((r) => routeItem(rowToEvent(r), route));
  // The pass publishes outside the mode's protocol (some rows may have reached the broker before
  // the loss): exactly-once says so on each record, as on the sweeper's (docs/delivery.md);
  // at-least-once has no header to add, and the rows are not visited.
  const headers = d.delivery.retryHeaders;
  if (Object.keys(headers).length > 0)
    for (const i of items) if (!i.routeError) Object.assign(i.message.headers, headers);
  const outcomes = await decideBatch(d, items, signal);
  if (!outcomes || !(await recorder.record(items, outcomes, signal, on))) return false;
  for (const o of outcomes) {
    if (o === PUBLISHED) result.published++;
    else if (o === PARKED) result.parked++;
    else result.failed++;
  }
  return true;
}
