/**
 * The Outbox Event Router's `table.expand.json.payload` (Debezium 3.6: EventRouterDelegate.apply
 * and JsonSchemaData), as byte-exact as the records need it. Pure.
 *
 * Debezium parses a payload string that starts with `{` or `[` with Jackson (readTree), infers a
 * Connect schema from it (toConnectSchema) and builds the value (toConnectData). Anything that
 * throws is caught and the payload stays the string — but only what was assigned before the
 * throw is undone, so there are three outcomes, kept apart here because the converters treat
 * them differently:
 *  - not expanded (not `{`/`[`, not JSON, a schema that cannot be inferred): the column's schema
 *    and the text, as without the option;
 *  - expanded: an inferred struct schema (named after the payload column) and its value;
 *  - half-expanded: the inferred schema stands but the value is still the text — a top-level
 *    array (its value is built as a Struct, which an array schema cannot be), `[]` (no schema at
 *    all: null), or a value that does not fit the schema (a number beyond 64 bits, a
 *    heterogeneous array of objects). JsonConverter then fails the record, except for `[]`
 *    (schemaless: a JSON string); StringConverter writes the text; an envelope fails.
 *
 * Inference (JsonSchemaData.toConnectSchema, every schema optional): string, boolean; a number is
 * int32 if Jackson reads an int, int64 if a long, float64 otherwise; an object is a struct named
 * by its path (`payload`, `payload.order`, …) whose fields keep the JSON order, leaving out null
 * fields (table.json.payload.null.behavior=ignore; optional_bytes keeps them as optional bytes)
 * and empty arrays; an array takes its first non-null element's schema (all elements of one JSON
 * type, numbers of one kind), or for objects the merge of the distinct element schemas: fields
 * of the first, then new fields of the others — a merged struct is NOT optional (Kafka's
 * SchemaUtil.copySchemaBasics does not copy it). Debezium merges in a HashSet's order, which
 * depends on identity hash codes and so changes from run to run; the relay merges in element
 * order. Elements whose schemas are equal, or each a prefix of the next, merge alike either way.
 */
import type { ArrayValue, ConnectSchema, ConnectValue, StructValue } from './connect-json.ts';

export type JsonNullBehavior = 'ignore' | 'optional_bytes';

/** A JSON value as Jackson's tree holds it: numbers by the node kind Jackson picks. */
type JsonNode =
  | { t: 'object'; fields: Map<string, JsonNode> }
  | { t: 'array'; items: JsonNode[] }
  | { t: 'string'; v: string }
  | { t: 'number'; kind: 'int' | 'long' | 'big' | 'double'; v: string }
  | { t: 'boolean'; v: boolean }
  | { t: 'null' };

/** What the router goes on with: the payload's schema (null: none) and value. */
export interface PayloadData {
  schema: ConnectSchema | null;
  value: ConnectValue;
  /** False when half-expanded: the value is still the text, the schema the inferred one (or none). */
  fits: boolean;
}

class NotExpanded extends Error {}

export function expandJsonPayload(
  text: string,
  column: ConnectSchema,
  field: string,
  nulls: JsonNullBehavior,
): PayloadData {
  if (!text.startsWith('{') && !text.startsWith('[')) return { schema: column, value: text, fits: true };
  let node: JsonNode;
  let schema: ConnectSchema | null;
  try {
    node = parseJson(text);
    schema = inferSchema(field, node, nulls);
  } catch {
    return { schema: column, value: text, fits: true };
  }
  if (node.t !== 'object' || schema === null) return { schema, value: text, fits: false };
  try {
    return { schema, value: structValue(node, schema), fits: true };
  } catch {
    return { schema, value: text, fits: false };
  }
}

// --- Jackson's reading (ObjectMapper.readTree, default features) ---

const INT_MIN = -(2n ** 31n);
const INT_MAX = 2n ** 31n - 1n;
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;
/** Jackson's StreamReadConstraints default nesting limit. */
const MAX_DEPTH = 1000;

/** Strict JSON (Jackson's defaults); what follows the first value is ignored, as readTree does. */
export function parseJson(text: string): JsonNode {
  let i = 0;
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r'))
      i++;
  };
  const fail = (): never => {
    throw new NotExpanded(`not JSON at ${i}`);
  };
  const str = (): string => {
    let out = '';
    i++; // "
    for (;;) {
      if (i >= text.length) fail();
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return out;
      }
      if (c < 0x20) fail();
      if (c !== 0x5c) {
        const from = i;
        while (
          i < text.length &&
          text.charCodeAt(i) !== 0x22 &&
          text.charCodeAt(i) !== 0x5c &&
          text.charCodeAt(i) >= 0x20
        )
          i++;
        out += text.slice(from, i);
        continue;
      }
      const e = text[i + 1];
      i += 2;
      if (e === 'u') {
        const hex = text.slice(i, i + 4);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail();
        out += String.fromCharCode(Number.parseInt(hex, 16));
        i += 4;
      } else {
        const m = (
          { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' } as Record<
            string,
            string
          >
        )[e ?? ''];
        if (m === undefined) fail();
        out += m;
      }
    }
  };
  const value = (depth: number): JsonNode => {
    if (depth > MAX_DEPTH) fail();
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const fields = new Map<string, JsonNode>();
      ws();
      if (text[i] === '}') {
        i++;
        return { t: 'object', fields };
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        const name = str();
        ws();
        if (text[i] !== ':') fail();
        i++;
        // A repeated name keeps its first place and its last value (Jackson's ObjectNode).
        fields.set(name, value(depth + 1));
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') {
          i++;
          return { t: 'object', fields };
        } else fail();
      }
    }
    if (c === '[') {
      i++;
      const items: JsonNode[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return { t: 'array', items };
      }
      for (;;) {
        items.push(value(depth + 1));
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') {
          i++;
          return { t: 'array', items };
        } else fail();
      }
    }
    if (c === '"') return { t: 'string', v: str() };
    for (const [word, node] of [
      ['true', { t: 'boolean', v: true }],
      ['false', { t: 'boolean', v: false }],
      ['null', { t: 'null' }],
    ] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return node;
      }
    }
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 1100));
    if (!m) return fail();
    i += m[0].length;
    if (m[1] !== undefined || m[2] !== undefined)
      return { t: 'number', kind: 'double', v: javaDouble(Number(m[0])) };
    const n = BigInt(m[0]);
    const kind = n >= INT_MIN && n <= INT_MAX ? 'int' : n >= LONG_MIN && n <= LONG_MAX ? 'long' : 'big';
    return { t: 'number', kind, v: n.toString() };
  };
  return value(0);
}

/**
 * Java's Double.toString (JDK 19+, the shortest decimal that reads back as the same double, which
 * is JavaScript's too): plain between 10^-3 and 10^7 with at least one fraction digit, else
 * d.dddE±n. (JDK 17's older algorithm prints a few rare doubles with one digit more.)
 */
export function javaDouble(x: number): string {
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity';
  const sign = x < 0 ? '-' : '';
  const a = Math.abs(x);
  const [mantissa, exponent] = a.toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const e = Number(exponent);
  if (a >= 1e-3 && a < 1e7) {
    if (e < 0) return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
    return `${sign}${digits.slice(0, e + 1).padEnd(e + 1, '0')}.${digits.slice(e + 1) || '0'}`;
  }
  return `${sign}${digits[0]}.${digits.slice(1) || '0'}E${e}`;
}

// --- JsonSchemaData.toConnectSchema ---

const OPTIONAL = (type: ConnectSchema['type']): ConnectSchema => ({ type, optional: true });

function isBlank(s: string | null): boolean {
  if (s === null) return true;
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x20) return false;
  return true;
}

function inferSchema(key: string | null, node: JsonNode, nulls: JsonNullBehavior): ConnectSchema | null {
  switch (node.t) {
    case 'string':
      return OPTIONAL('string');
    case 'boolean':
      return OPTIONAL('boolean');
    case 'number':
      return OPTIONAL(node.kind === 'int' ? 'int32' : node.kind === 'long' ? 'int64' : 'float64');
    case 'array':
      return node.items.length === 0
        ? null
        : { type: 'array', optional: true, items: arrayItems(key, node.items, nulls) };
    case 'object': {
      const fields: { name: string; schema: ConnectSchema }[] = [];
      for (const [name, v] of node.fields) {
        const s = inferSchema(`${isBlank(key) ? '' : `${key}.`}${name}`, v, nulls);
        if (s === null || fields.some((f) => f.name === name)) continue;
        // SchemaBuilder.field: a field needs a name.
        if (name === '') throw new NotExpanded('a field without a name');
        fields.push({ name, schema: s });
      }
      const s: ConnectSchema = { type: 'struct', optional: true, fields };
      if (key !== null) s.name = key;
      return s;
    }
    case 'null':
      return nulls === 'optional_bytes' ? OPTIONAL('bytes') : null;
  }
}

/** toConnectSchemaWithCycles: the schema of an array's elements. */
function arrayItems(key: string | null, items: JsonNode[], nulls: JsonNullBehavior): ConnectSchema {
  const sample = firstElement(items, nulls);
  if (sample.t === 'object') {
    const distinct: ConnectSchema[] = [];
    for (const e of items) {
      if (e.t !== 'object') continue;
      const s = inferSchema(key, e, nulls)!;
      if (!distinct.some((d) => sameSchema(d, s))) distinct.push(s);
    }
    return distinct.reduce((left, right) => mergeSchemas(left, right));
  }
  const s = inferSchema(null, sample, nulls);
  if (s === null) throw new NotExpanded('an array with no schema for its members');
  return s;
}

/** getFirstArrayElement: the first non-null element; every element of its JSON type (numbers: of its kind). */
function firstElement(items: JsonNode[], nulls: JsonNullBehavior): JsonNode {
  let ref: JsonNode = { t: 'null' };
  for (const e of items) {
    if (e.t === 'null') continue;
    if (ref.t === 'null') ref = e;
    if (e.t !== ref.t) throw new NotExpanded('not a homogenous array');
    if (ref.t === 'number' && inferSchema(null, ref, nulls)!.type !== inferSchema(null, e, nulls)!.type)
      throw new NotExpanded('not a homogenous array (number kinds)');
  }
  return ref;
}

/** mergeSchema: left's fields, then right's new ones; a bytes field gives way to another type. Not optional. */
function mergeSchemas(left: ConnectSchema, right: ConnectSchema): ConnectSchema {
  const fields = [...(left.fields ?? [])];
  for (const f of right.fields ?? []) {
    const i = fields.findIndex((o) => o.name === f.name);
    if (i < 0) fields.push(f);
    else if (
      !sameSchema(fields[i]!.schema, f.schema) &&
      fields[i]!.schema.type === 'bytes' &&
      f.schema.type !== 'bytes'
    )
      fields[i] = f;
  }
  const merged: ConnectSchema = { type: left.type, optional: false, fields };
  if (left.name !== undefined) merged.name = left.name;
  return merged;
}

export function sameSchema(a: ConnectSchema, b: ConnectSchema): boolean {
  return schemaKey(a) === schemaKey(b);
}

/** A schema's identity (ConnectSchema.equals: type, optional, name, version, fields, items). */
export function schemaKey(s: ConnectSchema): string {
  return JSON.stringify([
    s.type,
    s.optional,
    s.name ?? null,
    s.version ?? null,
    s.fields?.map((f) => [f.name, schemaKey(f.schema)]) ?? null,
    s.items ? schemaKey(s.items) : null,
  ]);
}

// --- JsonSchemaData.toConnectData, with Struct.put's validation ---

class DoesNotFit extends Error {}

function structValue(node: JsonNode, schema: ConnectSchema): StructValue {
  if (node.t !== 'object' || schema.type !== 'struct') throw new DoesNotFit('not a struct');
  return {
    struct: (schema.fields ?? []).map((f) => {
      const v = node.fields.get(f.name);
      return v === undefined ? null : fitted(v, f.schema);
    }),
  };
}

/** getStructFieldValue, then ConnectSchema.validateValue: the value, or DoesNotFit. */
function fitted(node: JsonNode, schema: ConnectSchema): ConnectValue {
  if (node.t === 'null') {
    if (!schema.optional) throw new DoesNotFit('null where the schema is not optional');
    return null;
  }
  const want = (type: ConnectSchema['type']) => {
    if (schema.type !== type) throw new DoesNotFit(`a ${type} value for a ${schema.type} schema`);
  };
  switch (node.t) {
    case 'string':
      want('string');
      return node.v;
    case 'boolean':
      want('boolean');
      return node.v ? 'true' : 'false';
    case 'number':
      if (node.kind === 'big') throw new DoesNotFit('a BigDecimal value');
      want(node.kind === 'int' ? 'int32' : node.kind === 'long' ? 'int64' : 'float64');
      return node.v;
    case 'array': {
      want('array');
      const items = schema.items!;
      return { array: node.items.map((e) => fitted(e, items)) } satisfies ArrayValue;
    }
    case 'object':
      return structValue(node, schema);
  }
}
