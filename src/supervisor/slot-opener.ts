import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { markRecovery, pendingRecovery, readProgress } from '../lifecycle/progress.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { failoverSlotsPossible, turnOnSlotFailover } from '../replication/failover.ts';
import { checkSlot, ensureSlot, type SlotState } from '../replication/preflight.ts';
import { dropSlotOfThisDatabase } from '../store/slots.ts';
import { publishUnrecorded, type RecoveryDeps } from './slot-recovery.ts';
import { startTimeline, type TimelineWatch } from './timeline-watch.ts';

/** The slot a round streams from, and the table pass due before it (null: none). */
/**
 * `timeline`: the server's timeline key when the slot was opened and a promotion looked for
 * (startTimeline); the stream must start on the same one (relay.ts #stream).
 */
export type OpenedSlot = SlotState & { recovery: string | null; timeline: string };

/**
 * The relay's slot: opened (created if missing) at every round, and the table pass that closes
 * the gap of a slot this relay had to create (slot-recovery.ts). Remembers across rounds whether
 * this process streamed from the slot before (a missing slot then means it was dropped) and why
 * PostgreSQL invalidated it (for the recovery's log lines).
 */
export class SlotOpener {
  readonly #c: Config;
  readonly #log: Logger;
  readonly #metrics: RelayMetrics;
  readonly #timelines: TimelineWatch;
  /** The relay's stop: a table pass stopped by it is repeated at the next start. */
  readonly #stop: AbortSignal;
  /** This process has opened the slot before: finding it missing later means it was dropped. */
  #slotSeen = false;
  /** invalidation_reason of the slot openSlot found lost, for recover's log lines. */
  #lostReason: string | null = null;

  constructor(c: Config, log: Logger, metrics: RelayMetrics, timelines: TimelineWatch, stop: AbortSignal) {
    this.#c = c;
    this.#log = log;
    this.#metrics = metrics;
    this.#timelines = timelines;
    this.#stop = stop;
  }

  /**
   * The slot, created if missing (with the publication, the only thing the relay creates), and
   * whether the rows it cannot stream must first come from the table (`recovery`). Cases:
   *  - exists, usable → stream from its confirmed position (recovery null);
   *  - missing, the slot's progress record empty → first start: created; the table pass publishes
   *    rows committed before the slot existed, if any (recovery 'created');
   *  - missing although the progress record shows it streamed (or this process streamed from
   *    it) → someone dropped it, or a failover to a server without it: created (recovery 'dropped');
   *  - wal_status = 'lost' (max_slot_wal_keep_size, idle timeout) → dropped and created again
   *    (recovery 'invalidated');
   *  - a recovery marked in the progress row and not finished (the relay died during the table
   *    pass) → that recovery again, whatever the slot.
   * The recovery is marked in the progress row BEFORE the new slot is created, and cleared after
   * the table pass (recover), so a crash in between repeats the pass instead of leaving a gap.
   * With --no-slot-recovery a lost or dropped slot ends the relay (SLOT_INVALIDATED, exit 69).
   */
  async openSlot(pool: pg.Pool, store: OutboxStore): Promise<OpenedSlot> {
    const c = this.#c;
    const client = await pool.connect();
    try {
      let recovery = await pendingRecovery(client, store.progress, c.slot);
      const state = await checkSlot(client, c.slot).catch(async (e) => {
        if (!(isRelayError(e, ErrorCode.SLOT_INVALIDATED) && c.slotRecovery)) throw e;
        recovery = 'invalidated';
        const reason = String(e.details?.reason ?? 'wal_removed');
        this.#lostReason = reason;
        this.#metrics.slotInvalidations.inc({ reason });
        this.#log.warn(
          { err: e.message, invalidation_reason: reason },
          `replication slot invalidated (wal_status = lost, invalidation_reason = ${reason}): dropping it to recover`,
        );
        await markRecovery(client, store.progress, c.slot, recovery);
        await dropSlotOfThisDatabase(client, c.slot).catch((d) => {
          // object_in_use: still active (the invalidated session's walsender is on its way out): the
          // next round tries again — the mark above says a recovery is due.
          throw new RelayError(
            ErrorCode.DATABASE_UNAVAILABLE,
            `cannot drop the lost slot yet: ${errorMessage(d)}`,
            {
              retriable: true,
              cause: d,
            },
          );
        });
        return 'missing' as const;
      });
      // A promotion under a slot that continues (PostgreSQL 17+'s synced failover slot): what
      // this relay published from the old primary and recorded there may be past the synced
      // slot's position but not in the new primary's progress record (its WAL did not reach the
      // standby): those rows would stay 'pending' for ever. The table pass covers them (the
      // rule of store/timeline.ts: the new primary's own state decides; duplicates, not losses).
      // Also after a restart: the timeline the last start stored with the progress record.
      const on = await startTimeline(client, store.progress, c.slot, this.#timelines, this.#log);
      if (state !== 'missing' && recovery === null && c.slotRecovery && on.promoted) {
        recovery = 'promoted';
        await markRecovery(client, store.progress, c.slot, recovery);
      }
      // Without the pass, those rows would stay 'pending' behind the slot, silently. As for a
      // lost slot: stop and say so. The new timeline is not stored: every start says it again.
      if (state !== 'missing' && recovery === null && !c.slotRecovery && on.promoted)
        throw new RelayError(
          ErrorCode.SLOT_INVALIDATED,
          `the database was promoted and slot ${c.slot} continued on the new primary: rows whose outcome only the old primary recorded (after the standby's last replay) would stay pending behind the slot for good. --no-slot-recovery is set, so the relay stops instead of publishing them from the table: start it once without --no-slot-recovery (it publishes them, duplicates possible, then streams), or resend them yourself (outbox-relay events list --status pending)`,
          { details: { slot: c.slot } },
        );
      if (state === 'missing' && recovery === null) {
        const recorded = await readProgress(client, store.progress, c.slot);
        recovery = this.#slotSeen || (recorded !== null && recorded !== '{}') ? 'dropped' : 'created';
        if (recovery === 'dropped' && !c.slotRecovery)
          throw new RelayError(
            ErrorCode.SLOT_INVALIDATED,
            `slot ${c.slot} is gone although this relay had streamed from it (dropped, or a failover to a server without it); events committed since its last position would be missed. --no-slot-recovery is set, so the relay stops instead of recovering from the table.`,
            { details: { slot: c.slot } },
          );
        if (c.slotRecovery) await markRecovery(client, store.progress, c.slot, recovery);
        else recovery = null;
      }
      const failover = c.slotFailover && (await failoverSlotsPossible(client));
      const slot = await ensureSlot(client, c.slot, { failover });
      await on.store();
      this.#slotSeen = true;
      if (slot.created) this.#log.info({ recovery, failover }, 'replication slot created (pgoutput)');
      else if (failover) await turnOnSlotFailover(client, c.databaseUrl, c.slot, this.#log);
      return { ...slot, recovery, timeline: on.now };
    } finally {
      client.release();
    }
  }

  /**
   * Publishes from the table every row no progress record covers (slot-recovery.ts) before
   * streaming from a slot this relay created, then clears the recovery mark. A lost slot is
   * logged and counted; on a first start this finds only rows committed before the slot existed.
   * false = stopped meanwhile (the mark stays: the next start repeats the pass).
   */
  async recover(recovery: string, d: RecoveryDeps): Promise<boolean> {
    const t0 = Date.now();
    if (recovery === 'promoted') return this.#recoverAfterPromotion(d, t0);
    const lost = recovery !== 'created';
    // The reason PostgreSQL gave, when this process saw the invalidation (not after a restart mid-recovery).
    const reason = recovery === 'invalidated' ? this.#lostReason : null;
    this.#lostReason = null;
    const why = reason ? `${recovery}: ${reason}` : recovery;
    if (lost) {
      this.#metrics.slotRecoveries.inc();
      this.#log.warn(
        { recovery, ...(reason && { invalidation_reason: reason }) },
        `replication slot lost (${why}): recovering without a gap — a new slot exists; publishing from the table every row no progress record covers, in id order, then streaming from the new slot`,
      );
    }
    const r = await publishUnrecorded(d, this.#stop);
    if (!r) return false;
    await markRecovery(d.store.db, d.store.progress, this.#c.slot, null);
    if (lost || r.published + r.failed + r.parked > 0)
      this.#log[lost ? 'warn' : 'info'](
        { recovery, ...(reason && { invalidation_reason: reason }), ...r, ms: Date.now() - t0 },
        lost
          ? `slot recovery done (${why}): ${r.published} rows published from the table (those the old slot had sent but not recorded are duplicates), ${r.failed} failed, ${r.parked} parked`
          : `published ${r.published} rows committed before the slot existed`,
      );
    return true;
  }

  /** The table pass after a promotion the slot survived (see openSlot). */
  async #recoverAfterPromotion(d: RecoveryDeps, t0: number): Promise<boolean> {
    this.#log.warn(
      { recovery: 'promoted' },
      "after a promotion the slot continued on the new primary: publishing from the table every row the new primary's progress record does not cover (outcomes recorded only on the old primary did not reach it), then streaming",
    );
    const r = await publishUnrecorded(d, this.#stop);
    if (!r) return false;
    await markRecovery(d.store.db, d.store.progress, this.#c.slot, null);
    this.#log.warn(
      { recovery: 'promoted', ...r, ms: Date.now() - t0 },
      `table pass after the promotion done: ${r.published} rows published (duplicates where the old primary had published them), ${r.failed} failed, ${r.parked} parked`,
    );
    return true;
  }
}
