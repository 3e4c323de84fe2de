/**
 * Why PostgreSQL invalidated a slot (wal_status = 'lost'), per server version:
 *  - 17+: `pg_replication_slots.invalidation_reason` names it: wal_removed (max_slot_wal_keep_size),
 *    rows_removed and wal_level_insufficient (a slot on a standby, conflicting with recovery), and
 *    from 18 on idle_timeout (idle_replication_slot_timeout);
 *  - 14 – 16: no column names it. A primary's slot is invalidated only by WAL removal. (16's
 *    `conflicting` is no help: it is true for every invalidated logical slot, WAL removal
 *    included — measured on 16.14; 17 narrowed it to the conflicts.)
 * The read is portable (src/store/slots.ts reads invalidation_reason through to_jsonb, so a
 * version without the column gives NULL); the choice is here, without I/O.
 */

/** The reasons PostgreSQL names (17+; older servers: wal_removed). */
export type InvalidationReason = 'wal_removed' | 'idle_timeout' | 'rows_removed' | 'wal_level_insufficient';

export interface InvalidationColumns {
  wal_status: string | null;
  /** 17+; NULL on older servers and on a slot that is not invalidated. */
  invalidation_reason: string | null;
}

/** The reason of an invalidated slot; null when it is not invalidated. */
export function invalidationReasonOf(s: InvalidationColumns): InvalidationReason | null {
  if (s.invalidation_reason) return s.invalidation_reason as InvalidationReason;
  return s.wal_status === 'lost' ? 'wal_removed' : null;
}

/** What happened, in a sentence an operator reads in the log and in `status`. */
export function describeInvalidation(reason: InvalidationReason | string | null): string {
  switch (reason) {
    case 'idle_timeout':
      return 'it was inactive for longer than idle_replication_slot_timeout (no relay streamed from it) and a checkpoint invalidated it';
    case 'rows_removed':
      return 'rows it still needed were removed (a slot on a standby: vacuum on the primary; hot_standby_feedback keeps them)';
    case 'wal_level_insufficient':
      return "the primary's wal_level is below logical (a slot on a standby)";
    default:
      return 'it fell further behind than max_slot_wal_keep_size and the WAL it still needed was removed';
  }
}
