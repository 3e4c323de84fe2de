import type pg from 'pg';
import { ROW_COLUMNS, rowColumns, type StoredRow } from './outbox-row.ts';
import type { Status } from './statuses.ts';
import { RESOLVABLE, sqlStatuses } from './statuses.ts';

type Db = pg.Pool | pg.ClientBase;

/**
 * Every move of an outbox row from one status to another: who makes it, and with which statement
 * (file#export, all in this folder). 'deleted' is retention's end of the row. README.md draws
 * the same table; transitions.test.ts checks that every statement named here exists.
 *
 * Every write is guarded by the status it leaves (or runs on a row claimed FOR UPDATE in that
 * status), so a row re-streamed after a crash, or moved meanwhile by someone else, is not moved
 * twice.
 */
export interface Transition {
  from: Status | 'new';
  to: Status | 'deleted';
  by: 'producer' | 'stream' | 'sweeper' | 'operator' | 'slot recovery' | 'retention';
  when: string;
  statement: string;
}

export const TRANSITIONS: readonly Transition[] = [
  {
    from: 'new',
    to: 'pending',
    by: 'producer',
    when: 'the application inserts the event (sdk/producer.ts, or its own INSERT)',
    statement: '',
  },
  {
    from: 'new',
    to: 'pending',
    by: 'operator',
    when: '`replay` inserts copies of a window',
    statement: 'replay.ts#copyBatch',
  },
  {
    from: 'pending',
    to: 'published',
    by: 'stream',
    when: "the broker acknowledged the batch: its ids go into the progress record (the row keeps 'pending')",
    statement: 'outbox-store.ts#OutboxStore.recordProgress',
  },
  {
    from: 'pending',
    to: 'failed',
    by: 'stream',
    when: 'the broker or the router refused the event for good',
    statement: 'outbox-store.ts#OutboxStore.recordFailed',
  },
  {
    from: 'pending',
    to: 'parked',
    by: 'stream',
    when: 'strict ordering: an earlier event of the aggregate is failed, dead or parked',
    statement: 'outbox-store.ts#OutboxStore.recordParked',
  },
  {
    from: 'pending',
    to: 'discarded',
    by: 'stream',
    when: "PostgreSQL refuses to record the failure (54000: aggregate columns too long for the failure index), or the row's text is not UTF-8 (a SQL_ASCII database: ROW_ENCODING)",
    statement: 'outbox-store.ts#OutboxStore.recordUnrecordable',
  },
  {
    from: 'pending',
    to: 'published',
    by: 'slot recovery',
    when: 'a lost slot: rows no progress record covers are published from the table',
    statement: 'outbox-store.ts#OutboxStore.recordProgress',
  },
  {
    from: 'pending',
    to: 'failed',
    by: 'slot recovery',
    when: 'as the stream',
    statement: 'outbox-store.ts#OutboxStore.recordFailed',
  },
  {
    from: 'pending',
    to: 'parked',
    by: 'slot recovery',
    when: 'as the stream',
    statement: 'outbox-store.ts#OutboxStore.recordParked',
  },
  {
    from: 'pending',
    to: 'discarded',
    by: 'slot recovery',
    when: 'as the stream (the same outcome code: src/outcome/record.ts)',
    statement: 'outbox-store.ts#OutboxStore.recordUnrecordable',
  },
  {
    from: 'failed',
    to: 'published',
    by: 'sweeper',
    when: 'a due retry was acknowledged',
    statement: 'transitions.ts#retryPublished',
  },
  {
    from: 'failed',
    to: 'failed',
    by: 'sweeper',
    when: 'a due retry was refused again: attempts + 1, due after the back-off',
    statement: 'transitions.ts#retryLater',
  },
  {
    from: 'failed',
    to: 'dead',
    by: 'sweeper',
    when: 'a retry was refused and attempts reached --max-attempts (then copied to the dead-letter topic)',
    statement: 'transitions.ts#retryDead',
  },
  {
    from: 'parked',
    to: 'published',
    by: 'sweeper',
    when: 'nothing failed or dead is ahead of it in its aggregate: released in id order',
    statement: 'transitions.ts#released',
  },
  {
    from: 'parked',
    to: 'failed',
    by: 'sweeper',
    when: "its release was refused: it becomes the aggregate's new head",
    statement: 'transitions.ts#releaseFailed',
  },
  {
    from: 'failed',
    to: 'failed',
    by: 'operator',
    when: '`events resend` (or the console): due now, attempts optionally reset',
    statement: 'transitions.ts#resendEvents',
  },
  {
    from: 'dead',
    to: 'failed',
    by: 'operator',
    when: '`events resend` (or the console)',
    statement: 'transitions.ts#resendEvents',
  },
  {
    from: 'failed',
    to: 'discarded',
    by: 'operator',
    when: '`events discard` (or the console)',
    statement: 'transitions.ts#discardEvents',
  },
  {
    from: 'dead',
    to: 'discarded',
    by: 'operator',
    when: '`events discard` (or the console)',
    statement: 'transitions.ts#discardEvents',
  },
  {
    from: 'published',
    to: 'deleted',
    by: 'retention',
    when: 'older than --retention-published-ms',
    statement: 'retention.ts#Retention.pruneOnce',
  },
  {
    from: 'discarded',
    to: 'deleted',
    by: 'retention',
    when: 'older than --retention-published-ms',
    statement: 'retention.ts#Retention.pruneOnce',
  },
  {
    from: 'dead',
    to: 'deleted',
    by: 'retention',
    when: 'older than --retention-dead-ms (only when set)',
    statement: 'retention.ts#Retention.pruneOnce',
  },
];

// The sweeper's retries: failed → published | failed (later) | dead.

/** Claims due failed rows, oldest first, FOR UPDATE SKIP LOCKED (run in the retry's transaction). */
export async function claimDueFailed(
  db: Db,
  table: string,
  limit: number,
  maxBytes = Number.MAX_SAFE_INTEGER,
  maxPayloadBytes = SWEEP_MAX_PAYLOAD_BYTES,
): Promise<StoredRow[]> {
  // Up to `limit` due rows are locked, but only those within `maxBytes` (payload and headers, in
  // id order; the first one always) are read: failed rows are often the large ones (a broker's
  // MESSAGE_TOO_LARGE, an HTTP 413), and a bytea comes back as hex text, twice its size — a round
  // of 100 rows of a few MB each outgrew the relay's memory limit. The rest wait, locked, for the
  // next round. o.id, the bigint: ROW_COLUMNS renders id as text, and "10" sorts before "7".
  const r = await db.query<StoredRow>(
    `${withinBytes(
      `SELECT o.id, coalesce(octet_length(o.payload), 0) + coalesce(octet_length(o.headers::text), 0) AS bytes
         FROM ${table} AS o
        WHERE status = 'failed' AND next_attempt_at <= now()
        ORDER BY o.id LIMIT $1 FOR UPDATE SKIP LOCKED`,
      'id',
      '$2',
    )}
     SELECT ${SWEEP_COLUMNS} FROM ${table} AS o JOIN taken USING (id)
      WHERE taken.in_budget
      ORDER BY o.id`,
    [limit, maxBytes, maxPayloadBytes],
  );
  return r.rows;
}

/**
 * The CTEs of a claim within a byte budget: `due` locks what `dueSql` selects (its `key` and a
 * `bytes` column, FOR UPDATE SKIP LOCKED); `taken` has each key with `in_budget`: whether the rows
 * before it in key order hold under `maxBytes` (a parameter), so the first row always is. The
 * claim reads only the rows in budget; the others stay locked until its transaction ends.
 */
export function withinBytes(dueSql: string, key: string, maxBytes: string): string {
  return `WITH due AS (${dueSql}),
     taken AS (SELECT ${key}, sum(bytes) OVER (ORDER BY ${key}) - bytes < ${maxBytes} AS in_budget FROM due)`;
}

/**
 * The largest payload the sweeper reads back: node-postgres reads a bytea as hex text, two
 * characters a byte, and a longer one than V8's longest string (2^29 characters) throws inside
 * its socket handler — the relay's crash, and the same row claimed again after the restart. A
 * larger row is claimed without its payload, `too_large` set: it fails (ROW_TOO_LARGE) without
 * being read.
 */
export const SWEEP_MAX_PAYLOAD_BYTES = 128 * 1024 * 1024;

/** A stored row's columns, the payload read only up to $3 bytes, with its size. */
const SWEEP_COLUMNS = rowColumns(
  'CASE WHEN octet_length(o.payload) > $3 THEN NULL ELSE o.payload END AS payload, octet_length(o.payload) AS payload_bytes, coalesce(octet_length(o.payload) > $3, false) AS too_large',
);

/** failed → published: a retry was acknowledged. */
export async function retryPublished(db: Db, table: string, id: string, attempts: number): Promise<void> {
  await db.query(
    `UPDATE ${table} SET status = 'published', published_at = now(), next_attempt_at = NULL, attempts = $2 WHERE id = $1`,
    [id, attempts],
  );
}

/** failed → dead: attempts exhausted. */
export async function retryDead(
  db: Db,
  table: string,
  id: string,
  attempts: number,
  error: string,
): Promise<void> {
  await db.query(
    `UPDATE ${table} SET status = 'dead', attempts = $2, last_error = $3, next_attempt_at = NULL WHERE id = $1`,
    [id, attempts, error],
  );
}

/** failed stays failed: one more attempt counted, due again after delayMs. */
export async function retryLater(
  db: Db,
  table: string,
  id: string,
  attempts: number,
  error: string,
  delayMs: number,
): Promise<void> {
  await db.query(
    `UPDATE ${table} SET attempts = $2, last_error = $3,
            next_attempt_at = now() + $4::bigint * interval '1 millisecond' WHERE id = $1`,
    [id, attempts, error, delayMs],
  );
}

// The sweeper's releases (strict ordering): parked → published | failed.

/** Aggregates with parked rows and no failed or dead row ahead of them (at most 100). */
export async function releasableAggregates(
  db: Db,
  table: string,
): Promise<{ aggregate_type: string; aggregate_id: string }[]> {
  const r = await db.query<{ aggregate_type: string; aggregate_id: string }>(
    `SELECT DISTINCT p.aggregate_type, p.aggregate_id FROM ${table} p
      WHERE p.status = 'parked' AND NOT EXISTS (
        SELECT 1 FROM ${table} f
         WHERE f.aggregate_type = p.aggregate_type AND f.aggregate_id = p.aggregate_id
           AND f.status IN ${sqlStatuses(RESOLVABLE)} AND f.id < p.id)
      LIMIT 100`,
  );
  return r.rows;
}

/** Whether the aggregate has a failed or dead row (its parked rows must wait). */
export async function hasUnresolvedHead(db: Db, table: string, type: string, id: string): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM ${table} WHERE aggregate_type = $1 AND aggregate_id = $2 AND status IN ${sqlStatuses(RESOLVABLE)} LIMIT 1`,
    [type, id],
  );
  return !!r.rowCount;
}

/** Claims the aggregate's parked rows in id order, FOR UPDATE SKIP LOCKED (in the release's transaction). */
export async function claimParked(
  db: Db,
  table: string,
  type: string,
  id: string,
  limit: number,
): Promise<StoredRow[]> {
  const r = await db.query<StoredRow>(
    `SELECT ${ROW_COLUMNS} FROM ${table} AS o
      WHERE aggregate_type = $1 AND aggregate_id = $2 AND status = 'parked'
      ORDER BY o.id LIMIT $3 FOR UPDATE SKIP LOCKED`,
    [type, id, limit],
  );
  return r.rows;
}

/** parked → failed: the first parked event that fails becomes the new head; the rest stay parked. */
export async function releaseFailed(
  db: Db,
  table: string,
  id: string,
  error: string,
  delayMs: number,
): Promise<void> {
  await db.query(
    `UPDATE ${table} SET status = 'failed', attempts = 1, last_error = $2,
            next_attempt_at = now() + $3::bigint * interval '1 millisecond' WHERE id = $1`,
    [id, error, delayMs],
  );
}

/** parked → published: released and acknowledged. */
export async function released(db: Db, table: string, id: string): Promise<void> {
  await db.query(`UPDATE ${table} SET status = 'published', published_at = now() WHERE id = $1`, [id]);
}

// The operator's resolutions (events resend|discard, the console).

/**
 * Failed/dead → failed and due now; the sweeper publishes it on its next round and, in strict
 * ordering, then releases the aggregate's parked events in order.
 */
export async function resendEvents(
  db: pg.ClientBase,
  table: string,
  ids: readonly string[],
  resetAttempts: boolean,
): Promise<number> {
  if (ids.length === 0) return 0;
  const r = await db.query(
    `UPDATE ${table} SET status = 'failed', next_attempt_at = now(),
            attempts = CASE WHEN $2::boolean THEN 0 ELSE attempts END
      WHERE id = ANY($1::bigint[]) AND status IN ${sqlStatuses(RESOLVABLE)}`,
    [ids, resetAttempts],
  );
  return r.rowCount ?? 0;
}

/**
 * Failed/dead → discarded (kept for audit until retention). The sweeper releases parked events
 * that no longer have a failed or dead event ahead of them, so a discarded head frees its
 * aggregate's followers on its next round.
 */
export async function discardEvents(
  db: pg.ClientBase,
  table: string,
  ids: readonly string[],
): Promise<number> {
  if (ids.length === 0) return 0;
  const r = await db.query(
    `UPDATE ${table} SET status = 'discarded', next_attempt_at = NULL
      WHERE id = ANY($1::bigint[]) AND status IN ${sqlStatuses(RESOLVABLE)}`,
    [ids],
  );
  return r.rowCount ?? 0;
}
