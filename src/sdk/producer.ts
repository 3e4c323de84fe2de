import { EVENT_COLUMNS } from '../route/outbox-row.ts';
import { qualified } from '../store/sql-ident.ts';
import { OutboxTransactionError, OutboxValidationError } from './errors.ts';
import { type OutboxEventInput, type OutboxRowValues, toRowValues } from './event-input.ts';
import {
  ABORTED_FIX,
  assertInTransaction,
  IN_FAILED_SQL_TRANSACTION,
  type SqlExecutor,
  sqlState,
} from './sql-executor.ts';
import { activeTraceContext, type TraceContext } from './trace-context.ts';
import { uuidv7 } from './uuid-v7.ts';

export interface OutboxOptions {
  /** Schema of the outbox table. Default "public". */
  schema?: string;
  /** Default "outbox". */
  table?: string;
  /** Largest payload accepted, in bytes. Default 1 MiB: Kafka's default message.max.bytes is about that. */
  maxPayloadBytes?: number;
  /**
   * Write events outside a transaction. Off by default, because an event that commits on its own can
   * describe a change that then rolls back. Turn it on for events that are the whole unit of work.
   */
  allowAutocommit?: boolean;
}

export interface EnqueuedEvent {
  /** outbox.id (bigint) as text. */
  id: string;
  eventId: string;
}

export interface Outbox {
  /** Inserts one event with the executor's transaction. */
  enqueue(executor: SqlExecutor, event: OutboxEventInput): Promise<EnqueuedEvent>;
  /** Inserts events with one multi-row INSERT; results in input order. */
  enqueueMany(executor: SqlExecutor, events: readonly OutboxEventInput[]): Promise<EnqueuedEvent[]>;
}

const COLUMNS = EVENT_COLUMNS;
/** Explicit casts (one per column of EVENT_COLUMNS, in its order) make the statement independent of how a driver types its parameters. */
const CASTS = ['uuid', 'text', 'text', 'text', 'bytea', 'text', 'jsonb', 'text'];
/** PostgreSQL's limit of 65,535 bind parameters per statement. */
export const MAX_ROWS_PER_INSERT = Math.floor(65_535 / COLUMNS.length);

/** The INSERT for `rows` events; each `$n` appears once, in increasing order (see SqlExecutor). */
export function insertSql(table: string, rows: number): string {
  const tuples: string[] = [];
  for (let r = 0; r < rows; r++) {
    const base = r * COLUMNS.length;
    tuples.push(`(${CASTS.map((cast, c) => `$${base + c + 1}::${cast}`).join(', ')})`);
  }
  return `INSERT INTO ${table} (${COLUMNS.join(', ')}) VALUES ${tuples.join(', ')} RETURNING id::text AS id, event_id::text AS event_id`;
}

function params(row: OutboxRowValues): unknown[] {
  return [
    row.eventId,
    row.aggregateType,
    row.aggregateId,
    row.eventType,
    row.payload,
    row.contentType,
    JSON.stringify(row.headers),
    row.traceparent,
  ];
}

/** The caller's trace context fills in what the event does not say itself. */
export function withTrace(row: OutboxRowValues, trace: TraceContext | null): OutboxRowValues {
  if (row.traceparent !== null || trace === null) return row;
  const headers =
    trace.tracestate && row.headers.tracestate === undefined
      ? { ...row.headers, tracestate: trace.tracestate }
      : row.headers;
  return { ...row, traceparent: trace.traceparent, headers };
}

export function createOutbox(opts: OutboxOptions = {}): Outbox {
  const table = qualified(opts.schema ?? 'public', opts.table ?? 'outbox');
  const maxPayloadBytes = opts.maxPayloadBytes ?? 1024 * 1024;
  if (!Number.isSafeInteger(maxPayloadBytes) || maxPayloadBytes < 0) {
    throw new RangeError(`maxPayloadBytes must be a non-negative integer, got ${opts.maxPayloadBytes}`);
  }
  const allowAutocommit = opts.allowAutocommit ?? false;

  /** `indexFields`: name fields events[i].x (enqueueMany) rather than x (enqueue). */
  async function insert(
    executor: SqlExecutor,
    events: readonly OutboxEventInput[],
    indexFields: boolean,
  ): Promise<EnqueuedEvent[]> {
    if (!Array.isArray(events)) throw new OutboxValidationError('events', 'must be an array');
    // Validate everything first: a bad event fails the call before any statement runs.
    let rows = events.map((e, i) => {
      try {
        return toRowValues(e, { maxPayloadBytes, newEventId: uuidv7 });
      } catch (err) {
        if (err instanceof OutboxValidationError && indexFields) {
          throw new OutboxValidationError(`events[${i}].${err.field}`, err.detail);
        }
        throw err;
      }
    });
    if (rows.length === 0) return [];
    if (rows.some((r) => r.traceparent === null)) {
      const trace = await activeTraceContext();
      rows = rows.map((r) => withTrace(r, trace));
    }
    if (!allowAutocommit) await assertInTransaction(executor, 'enqueue');

    const out: EnqueuedEvent[] = [];
    // Past the bind-parameter limit the batch takes several INSERTs: still atomic inside the caller's
    // transaction, not with allowAutocommit outside one.
    for (let start = 0; start < rows.length; start += MAX_ROWS_PER_INSERT) {
      const chunk = rows.slice(start, start + MAX_ROWS_PER_INSERT);
      const res = await executor.query(insertSql(table, chunk.length), chunk.flatMap(params)).catch((err) => {
        // The protocol status can lag just after a caught error (see protocolTxState): say it as the probe would.
        if (sqlState(err) !== IN_FAILED_SQL_TRANSACTION) throw err;
        throw new OutboxTransactionError(
          `enqueue refused: the transaction is aborted by an earlier error. ${ABORTED_FIX}`,
          { cause: err },
        );
      });
      const returned = (res.rows as { id: string; event_id: string }[]).map((r) => ({
        id: String(r.id),
        eventId: String(r.event_id),
      }));
      if (returned.length !== chunk.length) {
        throw new Error(`outbox INSERT returned ${returned.length} rows for ${chunk.length} events`);
      }
      // Identity values are drawn in VALUES order, so sorting by id restores input order whatever order
      // RETURNING used (SQL does not promise one).
      returned.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      out.push(...returned);
    }
    return out;
  }

  return {
    enqueueMany: (executor, events) => insert(executor, events, true),
    async enqueue(executor, event) {
      const [one] = await insert(executor, [event], false);
      return one!;
    },
  };
}
