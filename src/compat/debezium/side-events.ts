import { type EventFilter, filterSql } from '../../lifecycle/filter.ts';
import type { OperatorEvents } from '../../lifecycle/operator-events.ts';
import type { EventRecord, FailingRow } from '../../lifecycle/queries.ts';
import { RESOLVABLE, sqlStatuses, UNHEALTHY } from '../../lifecycle/statuses.ts';
import { discardSideRows, resendSideRows } from './side-table.ts';

/** The Debezium columns an event's fields come from (replication/columns-tuple.ts ColumnsMode). */
export interface SideColumns {
  eventId: string; // table.field.event.id
  key: string | null; // table.field.event.key
  routeBy: string; // route.by.field
  type: string; // table.field.event.type
  payload: string; // table.field.event.payload
}

/**
 * The preset's side table (`<table>_relay_failed`, side-table.ts) as the operator
 * commands and the console read the relay's own table: each row as an EventRecord, its fields
 * taken from the columns the WAL carried as the stream takes them (columns-tuple.ts columnsEvent:
 * id = the insert's WAL position, aggregate_type = the route.by.field column, aggregate_id = the
 * key column, '' when absent; the payload column's text as UTF-8 bytes), plus every column as
 * `columns`. created_at is when the event entered the side table (its first failure), not its
 * commit. The filters of the relay's table apply unchanged (filter.ts names the same columns);
 * 'pending' never occurs here (a pending event exists only in the WAL).
 *
 * The statements are parameterised: $1 the slot, $2…$6 the column names, then the filter's.
 */
const SOURCE_PARAMS = 6;

function source(table: string): string {
  return `(SELECT s.wal_position AS id, s.columns ->> $2::text AS event_id,
                  COALESCE(s.columns ->> $3::text, '') AS aggregate_type,
                  COALESCE(s.columns ->> $4::text, '') AS aggregate_id,
                  COALESCE(s.columns ->> $5::text, '') AS event_type,
                  convert_to(s.columns ->> $6::text, 'UTF8') AS payload,
                  'application/json'::text AS content_type, '{}'::jsonb AS headers,
                  NULL::text AS traceparent, s.created_at, s.status, s.attempts,
                  s.next_attempt_at, s.last_error, s.published_at, s.columns
             FROM ${table} AS s WHERE s.slot_name = $1) AS o`;
}

const COLUMNS = `o.id::text AS id, o.event_id, o.aggregate_type, o.aggregate_id, o.event_type, o.payload,
  o.content_type, o.headers, o.traceparent, o.created_at, o.status, o.attempts, o.next_attempt_at,
  o.last_error, o.published_at, o.columns`;

/** `table` quoted; `slot` the relay's (each slot keeps its own rows). */
export function debeziumSideEvents(table: string, slot: string, cols: SideColumns): OperatorEvents {
  const base = [slot, cols.eventId, cols.routeBy, cols.key, cols.type, cols.payload];
  const where = (f: EventFilter) => {
    const w = filterSql(f, SOURCE_PARAMS + 1);
    return { sql: w.sql, params: [...base, ...w.params] };
  };
  const from = source(table);
  return {
    table,
    async list(db, f, limit) {
      const w = where(f);
      const r = await db.query<EventRecord>(
        `SELECT ${COLUMNS} FROM ${from} WHERE ${w.sql} ORDER BY o.id LIMIT $${w.params.length + 1}`,
        [...w.params, limit],
      );
      return r.rows;
    },
    async count(db, f) {
      const w = where(f);
      const r = await db.query<{ status: string; n: string }>(
        `SELECT status, count(*)::text AS n FROM ${from} WHERE ${w.sql} GROUP BY status`,
        w.params,
      );
      return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
    },
    async read(db, id) {
      const r = await db.query<EventRecord>(`SELECT ${COLUMNS} FROM ${from} WHERE o.id = $7::bigint`, [
        ...base,
        id,
      ]);
      return r.rows[0] ?? null;
    },
    async statusesOf(db, ids) {
      const r = await db.query<{ id: string; status: string }>(
        `SELECT o.id::text AS id, o.status FROM ${from} WHERE o.id = ANY($7::bigint[]) ORDER BY o.id`,
        [...base, ids],
      );
      return r.rows;
    },
    async idsMatching(db, f) {
      const w = where(f);
      const r = await db.query<{ id: string }>(
        `SELECT o.id::text AS id FROM ${from} WHERE ${w.sql} ORDER BY o.id`,
        w.params,
      );
      return r.rows.map((x) => x.id);
    },
    resend: (db, ids, reset) => resendSideRows(db, table, slot, ids, reset),
    discard: (db, ids) => discardSideRows(db, table, slot, ids),
    async statusCounts(db, o = {}) {
      const r = await db.query<{ status: string; n: string; oldest: string | null; held: string }>(
        `SELECT status, count(*)::text AS n, extract(epoch FROM now() - min(created_at))::text AS oldest,
                count(DISTINCT (aggregate_type, aggregate_id))::text AS held
           FROM ${from}${o.published === false ? ` WHERE status IN ${sqlStatuses(UNHEALTHY)}` : ''}
          GROUP BY status`,
        base,
      );
      const counts = Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
      const failed = r.rows.find((x) => x.status === 'failed');
      return {
        counts,
        // Pending events are in the WAL only: the slot's lag says how far behind the relay is.
        oldestPendingAgeSeconds: null,
        oldestFailedAgeSeconds: failed?.oldest ? Number(failed.oldest) : null,
        parkedAggregates: Number(r.rows.find((x) => x.status === 'parked')?.held ?? 0),
      };
    },
    async failingGroups(db, limit) {
      const r = await db.query<FailingRow>(
        `SELECT status, aggregate_type, event_type,
                substring(last_error FROM '^[a-z]+/[A-Za-z_]+:') AS last_error, count(*)::text AS n
           FROM ${from} WHERE status IN ${sqlStatuses(RESOLVABLE)}
          GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 LIMIT $7`,
        [...base, limit],
      );
      return r.rows;
    },
  };
}
