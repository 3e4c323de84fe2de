/**
 * Kafka Connect's converters, as byte-exact as Debezium's records need them (connect-json's
 * JsonConverter, connect-api's StringConverter and SimpleHeaderConverter): a Connect schema and
 * a value in, the bytes a Connect worker writes out. Pure.
 *
 * Values arrive as PostgreSQL's text for the column (what pgoutput sends and Debezium reads):
 * integers are written as that text (PostgreSQL's output is already Java's Long.toString), a
 * boolean from 't'/'f', bytes from bytea's hex text (base64 in JSON), strings as they are.
 */

export type ConnectType =
  | 'string'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'float64'
  | 'boolean'
  | 'bytes'
  | 'struct'
  | 'array';

export interface ConnectSchema {
  type: ConnectType;
  optional: boolean;
  name?: string;
  version?: number;
  fields?: readonly { name: string; schema: ConnectSchema }[];
  /** An array's element schema. */
  items?: ConnectSchema;
}

/** A struct's values, in its schema's field order. */
export interface StructValue {
  struct: readonly ConnectValue[];
}

/** An array's elements (table.expand.json.payload). */
export interface ArrayValue {
  array: readonly ConnectValue[];
}

/**
 * A column's text as PostgreSQL sends it, or a struct of them; null is SQL NULL. Expanded JSON
 * (expand-json.ts) brings numbers as the text Java writes them, booleans as true/false, arrays.
 */
export type ConnectValue = string | StructValue | ArrayValue | null;

/** connect-json's type names (FLOAT64 is "double"). */
const TYPE_NAMES: Partial<Record<ConnectType, string>> = { float64: 'double' };

/** connect-json's schema JSON: type, fields, optional, name, version (its asJsonSchema order). */
export function schemaJson(s: ConnectSchema): string {
  let out = `{"type":"${TYPE_NAMES[s.type] ?? s.type}"`;
  if (s.type === 'array') out += `,"items":${schemaJson(s.items!)}`;
  if (s.type === 'struct')
    out += `,"fields":[${(s.fields ?? [])
      .map((f) => `${schemaJson(f.schema).slice(0, -1)},"field":${jacksonString(f.name)}}`)
      .join(',')}]`;
  out += `,"optional":${s.optional}`;
  if (s.name !== undefined) out += `,"name":${jacksonString(s.name)}`;
  if (s.version !== undefined) out += `,"version":${s.version}`;
  return `${out}}`;
}

/** The value as JSON (convertToJson). Throws for a NULL where the schema is not optional, as Connect does. */
export function valueJson(s: ConnectSchema, v: ConnectValue): string {
  if (v === null) {
    if (!s.optional) throw new Error('a NULL value where the schema is not optional');
    return 'null';
  }
  if (typeof v === 'object' && 'array' in v) {
    if (s.type !== 'array') throw new Error(`an array value for a ${s.type} schema`);
    return `[${v.array.map((e) => valueJson(s.items!, e)).join(',')}]`;
  }
  if (typeof v === 'object') {
    if (s.type !== 'struct') throw new Error(`a struct value for a ${s.type} schema`);
    const fields = s.fields ?? [];
    return `{${fields.map((f, i) => `${jacksonString(f.name)}:${valueJson(f.schema, v.struct[i] ?? null)}`).join(',')}}`;
  }
  switch (s.type) {
    case 'string':
      return jacksonString(v);
    case 'int16':
    case 'int32':
    case 'int64':
    case 'float64':
      return v;
    case 'boolean':
      return v === 't' || v === 'true' ? 'true' : 'false';
    case 'bytes':
      return `"${byteaBytes(v).toString('base64')}"`;
    default:
      throw new Error(`a ${s.type} value that is not a struct`);
  }
}

/**
 * JsonConverter.fromConnectData: null for a null schema and value (a tombstone); otherwise
 * `{"schema":…,"payload":…}` with schemas.enable (the default), the bare value without.
 */
export function jsonConverter(
  schemasEnable: boolean,
  s: ConnectSchema | null,
  v: ConnectValue,
): Buffer | null {
  if (s === null) {
    if (v === null) return null;
    // Schemaless (an expanded `[]` payload): the value's own JSON type, a string here.
    if (typeof v !== 'string') throw new Error('a value without a schema');
    return Buffer.from(
      schemasEnable ? `{"schema":null,"payload":${jacksonString(v)}}` : jacksonString(v),
      'utf8',
    );
  }
  const value = valueJson(s, v);
  return Buffer.from(schemasEnable ? `{"schema":${schemaJson(s)},"payload":${value}}` : value, 'utf8');
}

/** StringConverter (and SimpleHeaderConverter, Values.convertToString, for these types): the value's text. */
export function stringConverter(s: ConnectSchema | null, v: ConnectValue): Buffer | null {
  if (v === null) return null;
  // Schemaless (an expanded `[]` payload): a string's text.
  return Buffer.from(s === null ? (v as string) : connectText(s, v), 'utf8');
}

/** A value as Java's toString() writes it (a Struct as Struct{name=value,…}, NULL fields left out). */
function connectText(s: ConnectSchema, v: Exclude<ConnectValue, null>): string {
  if (typeof v === 'object' && 'array' in v)
    // java.util.List.toString
    return `[${v.array.map((e) => (e === null ? 'null' : connectText(s.items!, e))).join(', ')}]`;
  if (typeof v === 'object') {
    const parts: string[] = [];
    (s.fields ?? []).forEach((f, i) => {
      const fv = v.struct[i] ?? null;
      if (fv !== null) parts.push(`${f.name}=${connectText(f.schema, fv)}`);
    });
    return `Struct{${parts.join(',')}}`;
  }
  if (s.type === 'boolean') return v === 't' || v === 'true' ? 'true' : 'false';
  if (s.type === 'bytes') throw new Error('a bytes value cannot be written as text');
  return v;
}

/** bytea's text output (hex format `\x…`, or the old escape format) as bytes. */
export function byteaBytes(text: string): Buffer {
  if (text.startsWith('\\x')) return Buffer.from(text.slice(2), 'hex');
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') {
      if (text[i + 1] === '\\') {
        out.push(0x5c);
        i++;
      } else {
        out.push(Number.parseInt(text.slice(i + 1, i + 4), 8));
        i += 3;
      }
    } else out.push(text.charCodeAt(i));
  }
  return Buffer.from(out);
}

const HEX = '0123456789ABCDEF';

/**
 * A JSON string as Jackson writes it to UTF-8 (Connect's JsonSerializer): `"` and `\` escaped,
 * control characters as \b \t \n \f \r or \u00XX (upper-case hex: JSON.stringify writes lower
 * case), a character outside the BMP as its two surrogates escaped (`🙂` → \uD83D\uDE42: Jackson
 * does not combine them unless COMBINE_UNICODE_SURROGATES_IN_UTF8 is on), everything else as is.
 */
export function jacksonString(s: string): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c && (c < 0xd800 || c > 0xdfff)) continue;
    out += s.slice(from, i);
    from = i + 1;
    switch (c) {
      case 0x22:
        out += '\\"';
        break;
      case 0x5c:
        out += '\\\\';
        break;
      case 0x08:
        out += '\\b';
        break;
      case 0x09:
        out += '\\t';
        break;
      case 0x0a:
        out += '\\n';
        break;
      case 0x0c:
        out += '\\f';
        break;
      case 0x0d:
        out += '\\r';
        break;
      default:
        out += `\\u${HEX[c >> 12]}${HEX[(c >> 8) & 15]}${HEX[(c >> 4) & 15]}${HEX[c & 15]}`;
    }
  }
  return `${out}${s.slice(from)}"`;
}
