/**
 * Debezium's Outbox Event Router (EventRouterDelegate, Debezium 3.6) and the Connect converters
 * after it, as one pure function: an outbox row (each column's text, as pgoutput sends it) in,
 * the record Kafka Connect would write out (topic, key bytes, value bytes, headers, partition).
 * The options keep their Debezium names (event-router-options.ts reads them).
 *
 * What Debezium does, and so what this does:
 *  - key = the `table.field.event.key` column (NULL stays NULL), with that column's schema;
 *  - value = the payload column, or, when an additional field is placed in the envelope, a struct
 *    {payload, <alias>…} named `<topic.prefix>.<schema>.<table>.<routed-by value>.Value` — the
 *    routed-by value of the FIRST event with that payload schema (Debezium caches the envelope
 *    per payload schema: one for the column, one per inferred schema with
 *    `table.expand.json.payload`, expand-json.ts);
 *  - a NULL or blank payload (Java's trim()) is a tombstone (null value) with
 *    `route.tombstone.on.empty.payload`; otherwise it is converted like any value;
 *  - headers: Debezium 3's context headers (`extended.headers.enabled`), `id` (the event id
 *    column), then each header placement in configuration order;
 *  - partition: a `partition` placement's int column, else the producer's (murmur2 of the key bytes);
 *  - topic: RegexRouter over the routed-by value (java-regex.ts).
 */
import {
  type ConnectSchema,
  type ConnectValue,
  jsonConverter,
  type StructValue,
  stringConverter,
} from './connect-json.ts';
import type { Converter, DebeziumRouting } from './event-router-options.ts';
import { expandJsonPayload, type PayloadData, schemaKey } from './expand-json.ts';
import { javaReplaceWhole } from './java-regex.ts';

/** A column of the outbox table, from the catalog (nullability decides a schema's `optional`). */
export interface TableColumn {
  name: string;
  typeOid: number;
  notNull: boolean;
}

/** The Connect schema Debezium's PostgreSQL connector gives a column (its default handling modes). */
export function columnSchema(c: TableColumn): ConnectSchema {
  const optional = !c.notNull;
  switch (c.typeOid) {
    case 25: // text
    case 1043: // varchar
    case 1042: // bpchar
    case 19: // name
      return { type: 'string', optional };
    case 2950:
      return { type: 'string', optional, name: 'io.debezium.data.Uuid', version: 1 };
    case 114:
    case 3802:
      return { type: 'string', optional, name: 'io.debezium.data.Json', version: 1 };
    case 21:
      return { type: 'int16', optional };
    case 23:
      return { type: 'int32', optional };
    case 20:
      return { type: 'int64', optional };
    case 16:
      return { type: 'boolean', optional };
    case 17: // bytea, binary.handling.mode=bytes
      return { type: 'bytes', optional };
    default:
      throw new Error(
        `column ${c.name} has type OID ${c.typeOid}, which the Debezium preset does not convert (text, varchar, char, uuid, json, jsonb, int2, int4, int8, bool, bytea)`,
      );
  }
}

/** The record as Kafka Connect writes it. */
export interface DebeziumRecord {
  topic: string;
  key: Buffer | null;
  value: Buffer | null;
  /** In order; a name may repeat (a placement aliased `id`). */
  headers: [string, Buffer | null][];
  /** A `partition` placement's value; undefined: the producer's partitioner. */
  partition?: number;
  /** `table.field.event.timestamp` (a `timestamp` column, ms); undefined: the relay's. */
  timestampMs?: number;
}

/**
 * Per router instance (a connector task's run): the envelope schema's name per payload schema,
 * fixed by the first event with that payload schema (Debezium's payloadSchemaCache).
 */
export interface RouterState {
  envelopeNames?: Map<string, string>;
  /** The `__debezium.context.runId` header's value: one per run, as Debezium's task makes one per start. */
  runId: string;
}

const CONTEXT_SCHEMA: ConnectSchema = { type: 'string', optional: false };

function convert(c: Converter, s: ConnectSchema | null, v: ConnectValue): Buffer | null {
  return c.kind === 'json' ? jsonConverter(c.schemasEnable, s, v) : stringConverter(s, v);
}

/** Java's String.trim(): drops every character <= U+0020 at both ends. */
function javaBlank(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x20) return false;
  return true;
}

/**
 * The record for one row. `row` holds each column's text by name (null = SQL NULL); `columns`
 * the table's columns. Throws (a message naming the column) where Debezium would fail the record.
 */
export function debeziumRecord(
  row: Readonly<Record<string, string | null>>,
  columns: ReadonlyMap<string, TableColumn>,
  r: DebeziumRouting,
  table: { schema: string; table: string },
  state: RouterState,
): DebeziumRecord {
  const col = (name: string, what: string): TableColumn => {
    const c = columns.get(name);
    if (!c) throw new Error(`${what} column ${JSON.stringify(name)} is not a column of the outbox table`);
    return c;
  };
  const value = (name: string): string | null => (Object.hasOwn(row, name) ? (row[name] ?? null) : null);
  const routedBy = value(col(r.routeByField, 'route.by.field').name);
  if (routedBy === null) throw new Error(`route.by.field ${r.routeByField} is NULL`);
  const topic = javaReplaceWhole(routedBy, r.topicRegex, r.topicReplacement);

  const payloadCol = col(r.fieldPayload, 'table.field.event.payload');
  const payloadText = value(payloadCol.name);
  const column = columnSchema(payloadCol);
  // Debezium expands a String payload only (not bytes, not numbers).
  const payload: PayloadData =
    r.expandJsonPayload && payloadText !== null && column.type === 'string'
      ? expandJsonPayload(payloadText, column, r.fieldPayload, r.jsonNullBehavior)
      : { schema: column, value: payloadText, fits: true };
  const idCol = col(r.fieldEventId, 'table.field.event.id');
  const headers: [string, Buffer | null][] = [];
  if (r.contextHeaders) {
    const h = r.headerConverter;
    headers.push(
      ['__debezium.context.connectorLogicalName', convert(h, CONTEXT_SCHEMA, r.topicPrefix)],
      ['__debezium.context.taskId', convert(h, CONTEXT_SCHEMA, '0')],
      ['__debezium.context.connectorName', convert(h, CONTEXT_SCHEMA, 'postgresql')],
      ['__debezium.context.runId', convert(h, CONTEXT_SCHEMA, state.runId)],
    );
  }
  headers.push(['id', convert(r.headerConverter, columnSchema(idCol), value(idCol.name))]);
  const envelope = r.additional.filter((a) => a.placement === 'envelope');
  let partition: number | undefined;
  for (const a of r.additional) {
    const c = col(a.field, 'table.fields.additional.placement');
    if (a.placement === 'header')
      headers.push([a.alias, convert(r.headerConverter, columnSchema(c), value(c.name))]);
    else if (a.placement === 'partition') {
      if (columnSchema(c).type !== 'int32')
        throw new Error(`partition placement column ${c.name} must be an integer (int4) column`);
      const p = value(c.name);
      if (p !== null) partition = Number(p);
    }
  }

  // Debezium builds the envelope for every event, tombstones too: its schema is cached per payload
  // schema and named by the first event with it; the payload must fit it (Struct.put).
  let envelopeSchema: ConnectSchema | null = null;
  const envelopeValues: ConnectValue[] = [payload.value];
  if (envelope.length > 0) {
    if (payload.schema === null || !payload.fits)
      throw new Error(
        'an expanded payload that does not fit its inferred schema (a top-level array, a number beyond 64 bits, mixed objects) cannot be placed in the envelope',
      );
    state.envelopeNames ??= new Map();
    const cacheKey = schemaKey(payload.schema);
    let name = state.envelopeNames.get(cacheKey);
    if (name === undefined) {
      name = `${r.topicPrefix}.${table.schema}.${table.table}.${routedBy}.Value`;
      state.envelopeNames.set(cacheKey, name);
    }
    const fields = [{ name: 'payload', schema: payload.schema }];
    for (const a of envelope) {
      const c = col(a.field, 'table.fields.additional.placement');
      fields.push({ name: a.alias, schema: columnSchema(c) });
      envelopeValues.push(value(c.name));
    }
    envelopeSchema = { type: 'struct', optional: false, name, fields };
  }

  let valueBytes: Buffer | null;
  if (r.tombstoneOnEmptyPayload && (payloadText === null || javaBlank(payloadText))) valueBytes = null;
  else if (envelopeSchema === null) valueBytes = convert(r.valueConverter, payload.schema, payload.value);
  else
    valueBytes = convert(r.valueConverter, envelopeSchema, { struct: envelopeValues } satisfies StructValue);

  let keyBytes: Buffer | null = null;
  if (r.fieldEventKey !== null) {
    const k = col(r.fieldEventKey, 'table.field.event.key');
    keyBytes = convert(r.keyConverter, columnSchema(k), value(k.name));
  } else keyBytes = convert(r.keyConverter, { type: 'string', optional: false }, null);

  const out: DebeziumRecord = { topic, key: keyBytes, value: valueBytes, headers };
  if (partition !== undefined) out.partition = partition;
  if (r.fieldEventTimestamp !== null) {
    const t = value(col(r.fieldEventTimestamp, 'table.field.event.timestamp').name);
    if (t !== null) out.timestampMs = Date.parse(`${t.replace(' ', 'T')}Z`);
  }
  return out;
}
