import { describe, expect, it } from 'vitest';
import { type ConnectSchema, jsonConverter, schemaJson, stringConverter } from './connect-json.ts';
import { expandJsonPayload, javaDouble } from './expand-json.ts';

const JSON_COLUMN: ConnectSchema = {
  type: 'string',
  optional: true,
  name: 'io.debezium.data.Json',
  version: 1,
};
const expand = (text: string, nulls: 'ignore' | 'optional_bytes' = 'ignore') =>
  expandJsonPayload(text, JSON_COLUMN, 'payload', nulls);
const out = (
  text: string,
  converter: 'schemas' | 'plain' | 'string',
  nulls?: 'ignore' | 'optional_bytes',
) => {
  const { schema, value } = expand(text, nulls);
  const b =
    converter === 'string'
      ? stringConverter(schema, value)
      : jsonConverter(converter === 'schemas', schema, value);
  return b?.toString('utf8');
};

describe('table.expand.json.payload (JsonSchemaData), byte for byte', () => {
  const doc =
    '{"a": 1, "b": "x\\"y", "c": null, "d": [], "e": 2.50, "f": 5000000000, "g": [1, null, 2], "h": {"i": false}, "j": 1e2}';

  it('an object: a struct named payload, fields in JSON order, null fields and empty arrays left out', () => {
    expect(out(doc, 'plain')).toBe(
      '{"a":1,"b":"x\\"y","e":2.5,"f":5000000000,"g":[1,null,2],"h":{"i":false},"j":100.0}',
    );
    expect(schemaJson(expand(doc).schema!)).toBe(
      '{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},{"type":"string","optional":true,"field":"b"},' +
        '{"type":"double","optional":true,"field":"e"},{"type":"int64","optional":true,"field":"f"},' +
        '{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"g"},' +
        '{"type":"struct","fields":[{"type":"boolean","optional":true,"field":"i"}],"optional":true,"name":"payload.h","field":"h"},' +
        '{"type":"double","optional":true,"field":"j"}],"optional":true,"name":"payload"}',
    );
    // StringConverter: Struct.toString, null fields left out, lists as java.util.List writes them.
    expect(out(doc, 'string')).toBe(
      'Struct{a=1,b=x"y,e=2.5,f=5000000000,g=[1, null, 2],h=Struct{i=false},j=100.0}',
    );
  });

  it('table.json.payload.null.behavior=optional_bytes keeps null fields as optional bytes', () => {
    expect(out('{"c": null, "d": 1}', 'schemas', 'optional_bytes')).toBe(
      '{"schema":{"type":"struct","fields":[{"type":"bytes","optional":true,"field":"c"},{"type":"int32","optional":true,"field":"d"}],"optional":true,"name":"payload"},"payload":{"c":null,"d":1}}',
    );
  });

  it('arrays of objects: one schema when the elements agree; merged (not optional) when they differ', () => {
    expect(out('{"l": [{"a": 1}, null, {"a": 2}]}', 'plain')).toBe('{"l":[{"a":1},null,{"a":2}]}');
    const merged = '{"l": [{"a": 1, "bb": 2}, {"a": 3}]}';
    expect(out(merged, 'plain')).toBe('{"l":[{"a":1,"bb":2},{"a":3,"bb":null}]}');
    expect(schemaJson(expand(merged).schema!)).toContain(
      '"items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"},{"type":"int32","optional":true,"field":"bb"}],"optional":false,"name":"payload.l"}',
    );
    // A null element of a merged (required) struct: the value does not fit: JsonConverter fails, as Debezium's does.
    expect(() => out('{"l": [{"a": 1}, null, {"b": 2}]}', 'plain')).toThrow();
    expect(out('{"l": [{"a": 1}, null, {"b": 2}]}', 'string')).toBe('{"l": [{"a": 1}, null, {"b": 2}]}');
  });

  it('not expanded (the column schema and the text): not an object or array, not JSON, a schema that cannot be inferred', () => {
    for (const text of [
      '"s"',
      '42',
      ' {"a": 1}',
      '{"a": ',
      '[1, "two"]',
      '{"a": [[]]}',
      '{"": 1}',
      '[1, 2.5]',
    ])
      expect(expand(text)).toEqual({ schema: JSON_COLUMN, value: text, fits: true });
  });

  it('half expanded: a top-level array, `[]`, a number beyond 64 bits', () => {
    expect(() => out('[1, 2]', 'plain')).toThrow();
    expect(out('[1, 2]', 'string')).toBe('[1, 2]');
    expect(out('[]', 'schemas')).toBe('{"schema":null,"payload":"[]"}');
    expect(out('[]', 'plain')).toBe('"[]"');
    expect(expand('{"n": 100000000000000000000}').value).toBe('{"n": 100000000000000000000}');
    expect(() => out('{"n": 100000000000000000000}', 'schemas')).toThrow();
  });

  it("Java's Double.toString", () => {
    const cases: [number, string][] = [
      [10.5, '10.5'],
      [1, '1.0'],
      [1e7, '1.0E7'],
      [9999999, '9999999.0'],
      [0.001, '0.001'],
      [0.0001, '1.0E-4'],
      [1.5e-5, '1.5E-5'],
      [-5e9, '-5.0E9'],
      [123456789.5, '1.234567895E8'],
      [0.1 + 0.2, '0.30000000000000004'],
      [-0, '-0.0'],
      [1.7976931348623157e308, '1.7976931348623157E308'],
    ];
    for (const [x, java] of cases) expect(javaDouble(x)).toBe(java);
  });
});
