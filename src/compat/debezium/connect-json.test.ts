import { describe, expect, it } from 'vitest';
import {
  type ConnectSchema,
  jacksonString,
  jsonConverter,
  schemaJson,
  stringConverter,
} from './connect-json.ts';

const text = (b: Buffer | null) => (b === null ? null : b.toString('utf8'));
const STRING: ConnectSchema = { type: 'string', optional: false };
const JSON_COLUMN: ConnectSchema = {
  type: 'string',
  optional: true,
  name: 'io.debezium.data.Json',
  version: 1,
};

describe("Kafka Connect's JsonConverter, byte for byte", () => {
  it('a string key with schemas.enable (the default): quoted, in the envelope', () => {
    expect(text(jsonConverter(true, STRING, 'abc'))).toBe(
      '{"schema":{"type":"string","optional":false},"payload":"abc"}',
    );
    expect(text(jsonConverter(false, STRING, 'abc'))).toBe('"abc"');
  });

  it('a named schema: name and version after optional', () => {
    expect(schemaJson(JSON_COLUMN)).toBe(
      '{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1}',
    );
  });

  it('NULL: null in the envelope, "null" without it, no bytes only without a schema', () => {
    expect(text(jsonConverter(true, JSON_COLUMN, null))).toBe(
      '{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}',
    );
    expect(text(jsonConverter(false, JSON_COLUMN, null))).toBe('null');
    expect(jsonConverter(true, null, null)).toBeNull();
    expect(() => jsonConverter(true, STRING, null)).toThrow(/not optional/);
  });

  it('a struct: fields with "field" last, then optional and name; values in field order', () => {
    const s: ConnectSchema = {
      type: 'struct',
      optional: false,
      name: 'p.public.outbox.Order.Value',
      fields: [
        { name: 'payload', schema: JSON_COLUMN },
        { name: 'n', schema: { type: 'int32', optional: true } },
      ],
    };
    expect(text(jsonConverter(true, s, { struct: ['{"a": 1}', '7'] }))).toBe(
      '{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},{"type":"int32","optional":true,"field":"n"}],"optional":false,"name":"p.public.outbox.Order.Value"},"payload":{"payload":"{\\"a\\": 1}","n":7}}',
    );
    expect(text(jsonConverter(false, s, { struct: [null, null] }))).toBe('{"payload":null,"n":null}');
    expect(text(stringConverter(s, { struct: ['x', null] }))).toBe('Struct{payload=x}');
  });

  it('booleans, integers and bytes (base64)', () => {
    expect(text(jsonConverter(false, { type: 'boolean', optional: false }, 't'))).toBe('true');
    expect(text(jsonConverter(false, { type: 'int64', optional: false }, '-9223372036854775808'))).toBe(
      '-9223372036854775808',
    );
    expect(text(jsonConverter(false, { type: 'bytes', optional: false }, '\\x00ff10'))).toBe('"AP8Q"');
  });

  it("Jackson's escapes: short forms, upper-case \\u00XX, nothing else escaped", () => {
    expect(jacksonString('a"b\\c/d')).toBe('"a\\"b\\\\c/d"');
    expect(jacksonString('\b\t\n\f\r')).toBe('"\\b\\t\\n\\f\\r"');
    expect(jacksonString('\u0001\u001f\u007f')).toBe('"\\u0001\\u001F\u007f"');
    expect(jacksonString('ü日本\u2028\u0085')).toBe('"ü日本\u2028\u0085"');
    // Outside the BMP: the surrogate pair, escaped (what Connect wrote for a key ending in 🙂).
    expect(jacksonString('-🙂')).toBe('"-\\uD83D\\uDE42"');
  });

  it('StringConverter: the text as is; NULL is no bytes', () => {
    expect(text(stringConverter(STRING, 'k"ü'))).toBe('k"ü');
    expect(stringConverter(STRING, null)).toBeNull();
    expect(text(stringConverter({ type: 'int32', optional: false }, '12'))).toBe('12');
  });
});
