import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';
import {
  coveredUntil,
  DEFAULT_PARTITION_INTERVAL,
  inferInterval,
  intervalStart,
  nextStart,
} from '../lifecycle/partition-plan.ts';
import type { ApplicationTable } from '../store/application-table.ts';
import { managedPartitioning, readPartitioning } from '../store/partitions.ts';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { describeInvalidation, type InvalidationReason } from '../store/slot-invalidation.ts';
import { createSlot, readSlotRow, type SlotRow, slotCapacity, slotOwnershipError } from '../store/slots.ts';
import { qualified as qualifiedName, sqlName } from '../store/sql-ident.ts';
import { type Lsn, parseLsn } from './lsn.ts';
import { grantOn, RELAY_STATE_PRIVILEGES, relayTablePrivileges } from './privileges.ts';

export interface PreflightTarget {
  schema: string;
  table: string;
  publication: string;
  slot: string;
  /** Retention pruning (--prune, also an option of check and status); false drops the DELETE requirement. */
  prune?: boolean;
  /**
   * The application's table, as a preset names it (Debezium's): it is only read (SELECT), and a
   * publication that also publishes updates and deletes (Debezium's default) is accepted — the
   * stream reads inserts only. Absent: the relay's own outbox table.
   */
  applicationTable?: ApplicationTable;
}

export interface SlotState {
  /** Where the server will resume: everything after it is sent again. */
  confirmedFlushLsn: Lsn;
  created: boolean;
}

/**
 * Checks a database can feed the relay, each failure naming the problem and its fix
 * (RelayError.explanation). Order matters: the cheapest, most fundamental first. Read-only:
 * it never creates anything (the slot is created by `run` only after all of this passed).
 *
 * Privileges are checked for the connecting role, as the relay uses them: REPLICATION, USAGE on
 * the schema, SELECT/UPDATE (and DELETE unless prune is false) on the outbox table, SELECT/
 * UPDATE on its relay-state table (INSERT too when `migrate` has not inserted the slot's row),
 * and what a preset's side tables need (ApplicationTable.sideTables: the Debezium preset's failed
 * events). All missing grants are reported at once.
 */
export async function checkDatabase(db: pg.ClientBase, t: PreflightTarget): Promise<void> {
  const wal = await db.query<{ wal_level: string }>('SHOW wal_level');
  if (wal.rows[0]?.wal_level !== 'logical') {
    throw new RelayError(
      ErrorCode.WAL_LEVEL_NOT_LOGICAL,
      `wal_level is '${wal.rows[0]?.wal_level}', logical replication needs 'logical'`,
    );
  }
  const { name: roleName, replication } = await currentRole(db);
  if (!replication) {
    throw new RelayError(
      ErrorCode.ROLE_NOT_REPLICATION,
      `role ${roleName} lacks the REPLICATION attribute needed to stream from a slot`,
      {
        fix: `ALTER ROLE ${sqlName(roleName)} WITH REPLICATION; -- (on RDS: GRANT rds_replication TO ${sqlName(roleName)})`,
      },
    );
  }
  const schema = await db.query<{ usage: boolean }>(
    "SELECT has_schema_privilege(oid, 'USAGE') AS usage FROM pg_namespace WHERE nspname = $1",
    [t.schema],
  );
  if (!schema.rows[0]) {
    throw new RelayError(
      ErrorCode.OUTBOX_TABLE_MISSING,
      `schema ${t.schema} does not exist (table ${t.schema}.${t.table})`,
    );
  }
  if (!schema.rows[0].usage) {
    throw new RelayError(
      ErrorCode.INSUFFICIENT_PRIVILEGE,
      `role ${roleName} lacks USAGE on schema ${t.schema}, so it cannot reach ${t.schema}.${t.table}`,
      { fix: `GRANT USAGE ON SCHEMA ${sqlName(t.schema)} TO ${sqlName(roleName)};` },
    );
  }
  const readOnly = t.applicationTable !== undefined;
  const outbox = await tablePrivileges(
    db,
    t.schema,
    t.table,
    readOnly ? ['SELECT'] : relayTablePrivileges(t.prune),
  );
  if (!outbox) {
    throw new RelayError(ErrorCode.OUTBOX_TABLE_MISSING, `table ${t.schema}.${t.table} does not exist`);
  }
  const stateTable = `${t.table}_relay_state`;
  const state = await tablePrivileges(db, t.schema, stateTable, RELAY_STATE_PRIVILEGES);
  if (!state) {
    throw new RelayError(
      ErrorCode.RELAY_STATE_MISSING,
      `table ${t.schema}.${stateTable} (the relay's state, read by \`outbox-relay status\`) does not exist`,
    );
  }
  // The progress record (sql/000003): the relay's one statement per batch.
  const progressName = `${t.table}_relay_progress`;
  const progress = await tablePrivileges(db, t.schema, progressName, RELAY_STATE_PRIVILEGES);
  if (!progress) {
    throw new RelayError(
      ErrorCode.RELAY_STATE_MISSING,
      `table ${t.schema}.${progressName} (the slot's progress record, which says which events are published) does not exist`,
    );
  }
  // A preset's other tables (the Debezium preset's failed events): made by its migrations.
  const sides: [string, string[]][] = [];
  for (const side of t.applicationTable?.sideTables ?? []) {
    const name = `${t.table}${side.suffix}`;
    const lacking = await tablePrivileges(db, t.schema, name, side.privileges(t.prune));
    if (!lacking) {
      throw new RelayError(
        ErrorCode.RELAY_STATE_MISSING,
        `table ${t.schema}.${name} (${side.holds}) does not exist: run \`outbox-relay migrate\` with the same options`,
      );
    }
    sides.push([name, lacking]);
  }
  const grants: string[] = [];
  const missing: string[] = [];
  for (const [name, lacking] of [
    [t.table, outbox] as const,
    [stateTable, state] as const,
    [progressName, progress] as const,
    ...sides,
  ]) {
    if (!lacking.length) continue;
    missing.push(`${lacking.join(', ')} on ${t.schema}.${name}`);
    grants.push(grantOn(lacking, sqlName(t.schema, name), roleName));
  }
  if (missing.length) {
    const why =
      outbox.includes('DELETE') || sides.some(([, lacking]) => lacking.includes('DELETE'))
        ? ' (DELETE is for retention pruning: not needed with --no-prune)'
        : '';
    throw new RelayError(
      ErrorCode.INSUFFICIENT_PRIVILEGE,
      `role ${roleName} lacks ${missing.join(' and ')}${why}`,
      { fix: grants.join(' ') },
    );
  }
  // The slot's rows (state, progress): inserted by migrate; without them the relay must insert them itself.
  for (const name of [stateTable, progressName]) {
    const row = await db.query(`SELECT 1 FROM ${qualifiedName(t.schema, name)} WHERE slot_name = $1`, [
      t.slot,
    ]);
    if (row.rowCount === 0 && (await tablePrivileges(db, t.schema, name, ['INSERT']))?.length) {
      throw new RelayError(
        ErrorCode.INSUFFICIENT_PRIVILEGE,
        `${t.schema}.${name} has no row for slot ${t.slot}, and role ${roleName} may not insert it`,
        {
          fix: `outbox-relay migrate --slot ${t.slot} (as the schema owner: it inserts the row), or ${grantOn(['INSERT'], sqlName(t.schema, name), roleName)}`,
        },
      );
    }
  }
  const partitioning = await readPartitioning(db, qualifiedName(t.schema, t.table));
  const pub = await db.query<{
    puballtables: boolean;
    pubviaroot: boolean;
    pubinsert: boolean;
    pubupdate: boolean;
    pubdelete: boolean;
    pubtruncate: boolean;
  }>(
    'SELECT puballtables, pubviaroot, pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = $1',
    [t.publication],
  );
  const p = pub.rows[0];
  if (!p) {
    throw new RelayError(ErrorCode.PUBLICATION_MISSING, `publication ${t.publication} does not exist`);
  }
  const problems: string[] = [];
  const fixes: string[] = [];
  // A partitioned outbox: without publish_via_partition_root pgoutput names each partition, and
  // pg_publication_tables lists the partitions instead of the root.
  const partitions = new Set(partitioning?.partitions.map((x) => `${t.schema}.${x.name}`));
  const viaPartitions = partitioning !== null && !p.pubviaroot;
  if (viaPartitions) {
    problems.push(
      `${t.schema}.${t.table} is partitioned and the publication does not publish via the partition root: its rows would arrive under each partition's name, which the relay does not read as the outbox`,
    );
    fixes.push(
      `ALTER PUBLICATION ${sqlName(t.publication)} SET (publish_via_partition_root = true); -- or outbox-relay migrate (docs/outbox-table.md#partitioning)`,
    );
  }
  if (p.puballtables)
    problems.push(
      'it is FOR ALL TABLES (`outbox-relay migrate --narrow-publication` replaces it by one of the outbox table alone)',
    );
  else {
    const tables = await db.query<{ schemaname: string; tablename: string }>(
      'SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2',
      [t.publication],
    );
    const names = tables.rows.map((r) => `${r.schemaname}.${r.tablename}`);
    const want = `${t.schema}.${t.table}`;
    if (!names.includes(want) && !(viaPartitions && names.some((n) => partitions.has(n))))
      problems.push(`it does not cover ${want}`);
    const others = names.filter((n) => n !== want && !(viaPartitions && partitions.has(n)));
    if (others.length) problems.push(`it also covers ${others.join(', ')}`);
  }
  if (!p.pubinsert) problems.push('it does not publish inserts');
  const extra = [p.pubupdate && 'update', p.pubdelete && 'delete', p.pubtruncate && 'truncate'].filter(
    Boolean,
  );
  if (extra.length && !readOnly) {
    problems.push(
      `it also publishes ${extra.join(', ')} (the relay's own status updates would come back through the slot)`,
    );
  }
  if (problems.length) {
    throw new RelayError(
      ErrorCode.PUBLICATION_MISMATCH,
      `publication ${t.publication} is wrong: ${problems.join('; ')}`,
      fixes.length ? { fix: fixes.join(' ') } : {},
    );
  }
  await checkSlot(db, t.slot);
}

/** How many intervals ahead `check` wants created, at least (the relay keeps --partition-premake). */
const PARTITIONS_AHEAD_NEEDED = 1;

/**
 * `check` on a partitioned outbox (`run` creates what is missing itself, in its sweeper): a
 * partition must hold created_at = now and the next interval, else the application's inserts fail
 * ("no partition of relation … found for row") now or at the interval's turn. Read-only.
 */
export async function checkPartitions(
  db: pg.ClientBase,
  t: { schema: string; table: string },
): Promise<void> {
  const p = await readPartitioning(db, qualifiedName(t.schema, t.table));
  if (!p || !managedPartitioning(p)) return;
  const now = (await db.query<{ now: Date }>('SELECT now() AS now')).rows[0]!.now;
  const interval = inferInterval(p.partitions) ?? DEFAULT_PARTITION_INTERVAL;
  let needed = intervalStart(now, interval);
  for (let i = 0; i <= PARTITIONS_AHEAD_NEEDED; i++) needed = nextStart(needed, interval);
  const until = coveredUntil(p.partitions, now);
  if (until !== null && until.getTime() >= needed.getTime()) return;
  const what =
    until === null
      ? `no partition of ${t.schema}.${t.table} holds created_at = now (${now.toISOString()}): inserts fail now`
      : `the partitions of ${t.schema}.${t.table} end at ${until.toISOString()}: inserts fail from then on`;
  throw new RelayError(
    ErrorCode.PARTITIONS_MISSING,
    `${what} (partitioned by ${interval}; no partition is created ahead)`,
    {
      fix: `outbox-relay migrate (creates the current partition and --partition-premake after it), or start the relay, which keeps them created (its role must own the table); docs/outbox-table.md#partitioning`,
    },
  );
}

/** The connected role, and whether it may stream from and create or drop slots (REPLICATION or superuser). */
export async function currentRole(db: pg.ClientBase): Promise<{ name: string; replication: boolean }> {
  const r = await db.query<{ rolname: string; ok: boolean }>(
    'SELECT rolname, (rolreplication OR rolsuper) AS ok FROM pg_roles WHERE rolname = current_user',
  );
  return { name: r.rows[0]?.rolname ?? '(unknown)', replication: r.rows[0]?.ok ?? false };
}

/** The privileges of `wanted` the current role lacks on schema.table; null when the table does not exist. */
async function tablePrivileges(
  db: pg.ClientBase,
  schema: string,
  table: string,
  wanted: string[],
): Promise<string[] | null> {
  const r = await db.query<{ lacking: string[] | null; exists: boolean }>(
    `SELECT c.oid IS NOT NULL AS exists,
            (SELECT array_agg(w ORDER BY i) FROM unnest($2::text[]) WITH ORDINALITY AS u(w, i)
              WHERE NOT has_table_privilege(c.oid, w)) AS lacking
       FROM (SELECT to_regclass($1) AS oid) c`,
    [`${quoteForRegclass(schema)}.${quoteForRegclass(table)}`, wanted],
  );
  if (!r.rows[0]?.exists) return null;
  return r.rows[0].lacking ?? [];
}

/** to_regclass takes text that is parsed as an identifier: quote it. */
function quoteForRegclass(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A slot that exists but cannot be the relay's: another plugin, a physical slot, another database, lost. */
function assertUsable(slot: string, s: SlotRow): void {
  if (s.slot_type !== 'logical' || s.plugin !== 'pgoutput') {
    throw new RelayError(
      ErrorCode.SLOT_WRONG_PLUGIN,
      `slot ${slot} exists but is a ${s.slot_type} slot${s.plugin ? ` with plugin ${s.plugin}` : ''}; the relay needs a logical slot with pgoutput`,
    );
  }
  if (s.database !== s.current_db) throw slotOwnershipError(slot, s.database, s.current_db);
  if (s.wal_status === 'lost') throw slotInvalidatedError(slot, s.confirmed_flush_lsn, s.invalidation_reason);
}

/**
 * Read-only slot check (`check`, `status`): 'missing' (run will create it), 'ok', or throws
 * SLOT_WRONG_PLUGIN / SLOT_OTHER_DATABASE / SLOT_INVALIDATED.
 */
export async function checkSlot(db: pg.ClientBase, slot: string): Promise<'missing' | 'ok'> {
  const s = await readSlotRow(db, slot);
  if (!s) return 'missing';
  assertUsable(slot, s);
  return 'ok';
}

/**
 * Makes sure the slot exists and can be streamed from by this process. Call it last, after
 * every other check passed: a created slot retains WAL until a relay streams from it.
 * Cases:
 *  - missing → created (pgoutput; a failover slot with `failover`, PostgreSQL 17+ only); if
 *    max_replication_slots is exhausted → SLOT_LIMIT_REACHED
 *  - exists with another plugin / in another database / physical → fatal, with the fix
 *  - wal_status 'lost' → SLOT_INVALIDATED (fatal: WAL it needed is gone)
 *  - active in another process → SLOT_ACTIVE_ELSEWHERE (retriable: wait, another relay holds it)
 *  - exists, inactive → its confirmed_flush_lsn is where streaming resumes
 */
export async function ensureSlot(
  db: pg.ClientBase,
  slot: string,
  o: { failover?: boolean } = {},
): Promise<SlotState> {
  let s = await readSlotRow(db, slot);
  let created = false;
  if (!s) {
    const { used, max } = await slotCapacity(db);
    if (used >= max) {
      throw new RelayError(
        ErrorCode.SLOT_LIMIT_REACHED,
        `cannot create slot ${slot}: all ${max} replication slots (max_replication_slots) are in use`,
      );
    }
    try {
      await createSlot(db, slot, o.failover);
      created = true;
    } catch (e) {
      // duplicate_object: created concurrently (by another relay, or on another database); read it like an existing one.
      if (sqlStateOf(e) !== SqlState.DUPLICATE_OBJECT) {
        if (sqlStateOf(e) === SqlState.CONFIGURATION_LIMIT_EXCEEDED) {
          throw new RelayError(
            ErrorCode.SLOT_LIMIT_REACHED,
            `cannot create slot ${slot}: ${(e as Error).message}`,
            { cause: e },
          );
        }
        throw e;
      }
    }
    s = await readSlotRow(db, slot);
    if (!s)
      throw new RelayError(ErrorCode.SLOT_INVALIDATED, `slot ${slot} vanished right after it was created`, {
        retriable: true,
      });
  }
  assertUsable(slot, s);
  if (s.active) {
    throw new RelayError(
      ErrorCode.SLOT_ACTIVE_ELSEWHERE,
      `slot ${slot} is active in another process (pid ${s.active_pid})`,
      {
        retriable: true,
        details: { activePid: s.active_pid },
      },
    );
  }
  return { confirmedFlushLsn: s.confirmed_flush_lsn ? parseLsn(s.confirmed_flush_lsn) : 0n, created };
}

/**
 * wal_status = 'lost': PostgreSQL invalidated the slot — it fell further behind than
 * max_slot_wal_keep_size, or (18+) it was idle longer than idle_replication_slot_timeout, or (a
 * slot on a standby) it conflicted with recovery; `reason` says which (store/slot-invalidation.ts).
 * The slot can never be streamed from again, and the events committed between its last confirmed
 * position and now may never be relayed by it. The reason is in the message and in `details`.
 */
export function slotInvalidatedError(
  slot: string,
  confirmedFlushLsn: string | null,
  reason: InvalidationReason | null = null,
): RelayError {
  const from = confirmedFlushLsn ? ` (its last confirmed position was ${confirmedFlushLsn})` : '';
  return new RelayError(
    ErrorCode.SLOT_INVALIDATED,
    `slot ${slot} was invalidated by PostgreSQL (wal_status = lost, invalidation_reason = ${reason ?? 'wal_removed'}): ${describeInvalidation(reason)}${from}. ` +
      'Events committed between that position and now may be missing from the broker; the relay cannot resume from this slot.',
    { details: { slot, confirmedFlushLsn, reason: reason ?? 'wal_removed' } },
  );
}
