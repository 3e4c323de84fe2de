import { describe, expect, it } from 'vitest';
import { debeziumRecord, type TableColumn } from './event-router.ts';
import { type DebeziumOptionError, debeziumRouting } from './event-router-options.ts';

const columns = new Map<string, TableColumn>(
  (
    [
      ['id', 2950, true],
      ['aggregatetype', 1043, true],
      ['aggregateid', 1043, true],
      ['type', 1043, true],
      ['payload', 3802, false],
      ['tenant', 25, false],
      ['part', 23, false],
    ] as const
  ).map(([name, typeOid, notNull]) => [name, { name, typeOid, notNull }]),
);
const row = {
  id: '3f1c0b8e-2b7a-4c55-9a57-0f4f4b6f1d11',
  aggregatetype: 'Order',
  aggregateid: 'o-1',
  type: 'Created',
  payload: '{"a": 1}',
  tenant: null,
  part: '2',
};
const table = { schema: 'public', table: 'outbox' };
const text = (b: Buffer | null) => (b === null ? null : b.toString('utf8'));
const record = (props: Record<string, string>, r: Record<string, string | null> = row) =>
  debeziumRecord(r, columns, debeziumRouting({ 'extended.headers.enabled': 'false', ...props }), table, {
    runId: 'run',
  });

describe("Debezium's Outbox Event Router, as the preset writes it", () => {
  it('defaults: topic outbox.event.<aggregatetype>, JsonConverter with schemas for key and value, header id', () => {
    const r = record({});
    expect(r.topic).toBe('outbox.event.Order');
    expect(text(r.key)).toBe('{"schema":{"type":"string","optional":false},"payload":"o-1"}');
    expect(text(r.value)).toBe(
      '{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\\"a\\": 1}"}',
    );
    // Kafka Connect's default header converter is SimpleHeaderConverter: the uuid's text.
    expect(r.headers.map(([k, v]) => [k, text(v)])).toEqual([['id', row.id]]);
    expect(r.partition).toBeUndefined();
  });

  it('placements: headers in order (SimpleHeaderConverter: the text, NULL as null), partition, envelope named after the first event', () => {
    const props = {
      'key.converter': 'org.apache.kafka.connect.storage.StringConverter',
      'value.converter': 'org.apache.kafka.connect.json.JsonConverter',
      'value.converter.schemas.enable': 'true',
      'table.fields.additional.placement':
        'type:header:eventType,tenant:header,part:partition,type:envelope:t',
      'topic.prefix': 'app',
    };
    const routing = debeziumRouting({ 'extended.headers.enabled': 'false', ...props });
    const state = { runId: 'run' };
    const first = debeziumRecord(row, columns, routing, table, state);
    expect(text(first.key)).toBe('o-1');
    expect(first.headers.map(([k, v]) => [k, text(v)])).toEqual([
      ['id', row.id],
      ['eventType', 'Created'],
      ['tenant', null],
    ]);
    expect(first.partition).toBe(2);
    expect(text(first.value)).toContain(
      '"name":"app.public.outbox.Order.Value"},"payload":{"payload":"{\\"a\\": 1}","t":"Created"}}',
    );
    // Debezium caches the envelope schema: a later event of another type keeps the first name.
    const later = debeziumRecord({ ...row, aggregatetype: 'Customer' }, columns, routing, table, state);
    expect(text(later.value)).toContain('"name":"app.public.outbox.Order.Value"');
    expect(later.topic).toBe('outbox.event.Customer');
  });

  it('tombstones: a NULL or blank payload is a null value only with route.tombstone.on.empty.payload', () => {
    expect(
      record({ 'route.tombstone.on.empty.payload': 'true' }, { ...row, payload: null }).value,
    ).toBeNull();
    expect(text(record({ 'value.converter.schemas.enable': 'false' }, { ...row, payload: null }).value)).toBe(
      'null',
    );
    expect(
      record(
        { 'value.converter': 'org.apache.kafka.connect.storage.StringConverter' },
        { ...row, payload: null },
      ).value,
    ).toBeNull();
  });

  it("Debezium 3's context headers come first", () => {
    const r = debeziumRecord(
      row,
      columns,
      debeziumRouting({
        'header.converter': 'org.apache.kafka.connect.storage.SimpleHeaderConverter',
        'topic.prefix': 'app',
      }),
      table,
      { runId: 'r-1' },
    );
    expect(r.headers.map(([k, v]) => [k, text(v)])).toEqual([
      ['__debezium.context.connectorLogicalName', 'app'],
      ['__debezium.context.taskId', '0'],
      ['__debezium.context.connectorName', 'postgresql'],
      ['__debezium.context.runId', 'r-1'],
      ['id', row.id],
    ]);
  });

  it('names the column Debezium would fail on', () => {
    expect(() => record({ 'route.by.field': 'nope' })).toThrow(/route.by.field column "nope"/);
    expect(() => record({ 'table.fields.additional.placement': 'tenant:partition' })).toThrow(/int4/);
  });
});

describe('the preset options, by their Debezium names', () => {
  it('accepts a connector file: transforms.<name>. and debezium.transforms.<name>. prefixes, connector keys', () => {
    const r = debeziumRouting({
      'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
      'database.hostname': 'db',
      'transforms.outbox.type': 'io.debezium.transforms.outbox.EventRouter',
      'transforms.outbox.route.by.field': 'kind',
      'transforms.outbox.table.fields.additional.placement': 'a:header, b:envelope:bb',
    });
    expect(r.routeByField).toBe('kind');
    expect(r.additional).toEqual([
      { field: 'a', placement: 'header', alias: 'a' },
      { field: 'b', placement: 'envelope', alias: 'bb' },
    ]);
    expect(r.headerConverter).toEqual({ kind: 'string' });
    // Debezium Server: JSON for key, value and headers.
    expect(debeziumRouting({ 'debezium.transforms.outbox.route.by.field': 'k' }).headerConverter).toEqual({
      kind: 'json',
      schemasEnable: true,
    });
  });

  it('refuses, naming the property, what it cannot write byte for byte', () => {
    const bad = (props: Record<string, string>) => {
      try {
        debeziumRouting(props);
      } catch (e) {
        return (e as DebeziumOptionError).property;
      }
      return null;
    };
    expect(bad({ 'table.expand.json.payload': 'yes' })).toBe('table.expand.json.payload');
    expect(bad({ 'table.json.payload.null.behavior': 'drop' })).toBe('table.json.payload.null.behavior');
    expect(bad({ 'value.converter': 'io.confluent.connect.avro.AvroConverter' })).toBe('value.converter');
    expect(bad({ 'route.topic.regex': '\\Qx\\E' })).toBe('route.topic.regex');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Java's syntax.
    expect(bad({ 'route.topic.replacement': 'x.${nope}' })).toBe('route.topic.replacement');
    expect(bad({ 'table.fields.additional.placement': 'a:body' })).toBe('table.fields.additional.placement');
    expect(bad({ 'route.tombstone.on.empty.payload': 'yes' })).toBe('route.tombstone.on.empty.payload');
    expect(bad({ 'tabel.field.event.id': 'x' })).toBe('tabel.field.event.id');
  });

  it('table.expand.json.payload: the payload as structured JSON; an envelope named per payload schema by its first event', () => {
    const props = {
      'table.expand.json.payload': 'true',
      'table.fields.additional.placement': 'tenant:envelope',
      'topic.prefix': 'app',
      'value.converter.schemas.enable': 'false',
    };
    const routing = debeziumRouting({ 'extended.headers.enabled': 'false', ...props });
    const state = { runId: 'run' };
    const at = (aggregatetype: string, payload: string) =>
      text(debeziumRecord({ ...row, aggregatetype, payload }, columns, routing, table, state).value);
    expect(at('Order', '{"a": 1}')).toBe('{"payload":{"a":1},"tenant":null}');
    expect(at('Invoice', '{"b": "x"}')).toBe('{"payload":{"b":"x"},"tenant":null}');
    // Not JSON to expand: the text, as without the option.
    expect(at('Invoice', '"s"')).toBe('{"payload":"\\"s\\"","tenant":null}');
    const withSchemas = debeziumRouting({
      ...props,
      'extended.headers.enabled': 'false',
      'value.converter.schemas.enable': 'true',
    });
    const fresh = { runId: 'run' };
    const name = (aggregatetype: string, payload: string) =>
      /"optional":false,"name":"([^"]+)"\},"payload":/.exec(
        text(debeziumRecord({ ...row, aggregatetype, payload }, columns, withSchemas, table, fresh).value) ??
          '',
      )?.[1];
    expect(name('Order', '{"a": 1}')).toBe('app.public.outbox.Order.Value');
    expect(name('Invoice', '{"a": 2}')).toBe('app.public.outbox.Order.Value');
    expect(name('Invoice', '{"b": "x"}')).toBe('app.public.outbox.Invoice.Value');
    expect(name('Customer', '"s"')).toBe('app.public.outbox.Customer.Value');
    expect(name('Order', '"t"')).toBe('app.public.outbox.Customer.Value');
    // An expanded `[]` has no schema: an envelope cannot hold it (Debezium's task fails there).
    expect(() => debeziumRecord({ ...row, payload: '[]' }, columns, routing, table, state)).toThrow(
      /cannot be placed in the envelope/,
    );
  });
});
