import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PgoutputPlugin } from 'pg-logical-replication';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binaryPossible } from '../../src/replication/connection.ts';
import { OutboxDecoder } from '../../src/replication/decoder.ts';
import type { OutboxEvent } from '../../src/route/event.ts';
import { rowToEvent } from '../../src/route/outbox-row.ts';
import { checkEvent, UnreadableValue } from '../../src/route/row-check.ts';
import { keepTimestampMicroseconds } from '../../src/route/timestamptz.ts';
import { SUB_MILLISECOND_MICROS } from '../../src/route/value-format.ts';
import { useTestDatabase } from '../support/postgres.ts';
import { migrateDb } from '../support/relay.ts';

/**
 * pgoutput's binary mode against the text mode, on a real PostgreSQL: the same rows, decoded
 * from both streams (pg_logical_slot_peek_binary_changes with and without 'binary'), must give
 * identical events, value by value — for the migrated table with hostile rows and extreme values,
 * for tables whose columns have the other types the decoder reads in binary, in several session
 * time zones, with pg's timestamptz parser and with the relay's microsecond one. The text path
 * itself is anchored to pg-logical-replication's parser.
 */
const db = useTestDatabase();
const SLOT = `bin_${randomBytes(4).toString('hex')}`;
const pgTimestamptz = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text');

/** Tables (each with its publication) whose column types differ from the migrated outbox. */
const TABLES: Record<string, string> = {
  // Types the relay reads in binary, other than the migrated table's.
  texts: `id int4, event_id text, aggregate_type varchar(40), aggregate_id numeric, event_type name,
    payload bytea, content_type char(24), headers json, traceparent text, created_at timestamp`,
  numbers: `id int2, event_id uuid, aggregate_type text, aggregate_id int8, event_type int4,
    payload bytea, content_type oid, headers jsonb, traceparent bool, created_at date`,
  // A column the relay reads with a type it has no binary reader for.
  unreadable: `id int8, event_id uuid, aggregate_type text, aggregate_id inet, event_type text,
    payload bytea, content_type text, headers jsonb, traceparent text, created_at timestamptz`,
};

// Not here: 1 BC's February 29, which pg's text parser misreads as March 1 (it builds years 0–99
// as 1900–1999, and 1900 has no February 29); the binary path reads it right.
const TIMESTAMPS = [
  '2026-11-23 01:37:03.123456+00',
  '2026-11-23 01:37:03+00',
  '2026-11-23 01:37:03.1+00',
  '2026-11-23 01:37:03.000999+00',
  '1969-12-31 23:59:59.999999+00',
  '1999-12-31 23:59:59.999999+00',
  '2000-01-01 00:00:00+00',
  '1890-01-01 00:00:00.00025+00',
  '0100-01-01 00:00:00+00',
  '0099-12-31 23:59:59.999999+00',
  '0001-01-01 00:00:00+00',
  '0001-12-31 23:59:59.5+00 BC',
  '0044-03-15 12:00:00.123456+00 BC',
  '4713-11-24 00:00:00+00 BC',
  '9999-12-31 23:59:59.999999+00',
  '10000-01-01 00:00:00.000001+00',
  '275760-09-12 00:00:00+00',
  '275760-09-13 00:00:00.001+00',
  '294276-12-31 23:59:59.999999+00',
  'infinity',
  '-infinity',
];

const MB = randomBytes(1024 * 1024);

/** The migrated outbox's rows: [column → value (text cast by the column's type) ]. */
const OUTBOX_ROWS: Record<string, unknown>[] = [
  {},
  { id: '9223372036854775807' },
  { id: '-9223372036854775808' },
  { id: '-1' },
  { id: '9007199254740993' },
  { id: '0' },
  {
    event_id: null,
    aggregate_type: null,
    aggregate_id: null,
    event_type: null,
    payload: null,
    content_type: null,
    headers: null,
    traceparent: null,
    created_at: null,
  },
  {
    aggregate_type: '',
    aggregate_id: '',
    event_type: '',
    content_type: '',
    traceparent: '',
    payload: Buffer.alloc(0),
  },
  {
    aggregate_id: 'zé€😀\u0001 Ω',
    event_type: 'Größe',
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  },
  { aggregate_id: '\uFEFFbom', event_type: '\uFEFF' },
  { payload: MB, aggregate_id: 'k'.repeat(300_000) },
  {
    headers: '{"a": "\\u00e9", "b": "\\ud83d\\ude00", "c": "tab\\t", "d": "q\\"", "e": "\\u001f", "é": "x"}',
  },
  { headers: '[1, 2]' },
  { headers: '{"n": 1.50, "big": 12345678901234567890, "nested": {"x": [true, null]}}' },
  { headers: JSON.stringify({ big: 'z'.repeat(2 * 1024 * 1024) }) },
  { event_id: '00000000-0000-0000-0000-000000000000' },
  { event_id: 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF' },
  ...TIMESTAMPS.map((t) => ({ created_at: t })),
];

const BASE: Record<string, unknown> = {
  event_id: '0190f0a4-1c2b-7d3e-8f40-5a6b7c8d9e0f',
  aggregate_type: 'Order',
  aggregate_id: 'order-1',
  event_type: 'OrderPlaced',
  payload: Buffer.from('{"total":12.5}'),
  content_type: 'application/json',
  headers: '{"source": "shop"}',
  traceparent: null,
  created_at: '2026-11-23 01:37:03.123456+00',
};

/** Rows for the other tables: values each column type takes. */
const OTHER_ROWS: Record<string, Record<string, unknown>[]> = {
  texts: [
    { id: 7, event_id: 'e-1', aggregate_id: '0', created_at: '2026-11-23 01:37:03.123456' },
    { id: -2147483648, aggregate_id: '-123456789012345678901234567890.000000000000000000001' },
    { id: 2147483647, aggregate_id: '0.0001', created_at: '0044-03-15 12:00:00.5 BC' },
    { aggregate_id: '10000', created_at: 'infinity' },
    { aggregate_id: '1e-20', created_at: '-infinity' },
    { aggregate_id: '12345.678900', created_at: '10000-01-01 00:00:00' },
    { aggregate_id: 'NaN' },
    { aggregate_id: 'Infinity' },
    { aggregate_id: '-Infinity' },
    { aggregate_id: '-0.5', content_type: 'ü', headers: '{"a": "\\u00e9", "b" : [1,2]}' },
    { aggregate_id: '99999999', event_type: 'x'.repeat(63) },
    { aggregate_id: '100000000.00000001', headers: '"x"' },
  ],
  numbers: [
    {
      id: 7,
      aggregate_id: '9223372036854775807',
      event_type: 0,
      content_type: 4294967295,
      traceparent: true,
    },
    {
      id: -32768,
      aggregate_id: '-9223372036854775808',
      event_type: -2147483648,
      content_type: 0,
      traceparent: false,
    },
    { id: 32767, aggregate_id: '-9007199254740993', event_type: 2147483647, created_at: '0044-03-15 BC' },
    { aggregate_id: '9007199254740992', created_at: '1970-01-01' },
    { created_at: 'infinity' },
    { created_at: '-infinity' },
    { created_at: '5874897-12-31' },
    { created_at: '2000-02-29' },
  ],
  unreadable: [{ aggregate_id: '10.0.0.1/8' }, { aggregate_id: '::1' }],
};

/** Every pgoutput message of the slot's changes so far. */
async function peek(publication: string, binary: boolean, timeZone: string): Promise<Buffer[]> {
  const c = await db.pool.connect();
  try {
    await c.query(`SET TimeZone = ${pg.escapeLiteral(timeZone)}`);
    const r = await c.query<{ data: Buffer }>(
      `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
         'proto_version', '1', 'publication_names', $2${binary ? `, 'binary', 'true'` : ''})`,
      [SLOT, publication],
    );
    return r.rows.map((row) => row.data);
  } finally {
    await c.query('RESET TimeZone');
    c.release();
  }
}

function decodeAll(table: string, messages: Buffer[]): OutboxEvent[] {
  const decoder = new OutboxDecoder('public', table);
  const events: OutboxEvent[] = [];
  for (const m of messages) {
    const d = decoder.decode(m);
    if (d.kind === 'event') events.push(d.event);
  }
  return events;
}

/** The text messages through pg-logical-replication's parser (the path the decoder's own reading replaced). */
function viaLibrary(messages: Buffer[]): OutboxEvent[] {
  const parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
  const events: OutboxEvent[] = [];
  for (const m of messages) {
    // biome-ignore lint/suspicious/noExplicitAny: the parser's message union is loosely typed.
    const msg: any = parser.parse(m);
    if (msg.tag === 'insert') events.push(rowToEvent(msg.new));
  }
  return events;
}

const EVENT_FIELDS = [
  'id',
  'eventId',
  'aggregateType',
  'aggregateId',
  'eventType',
  'payload',
  'contentType',
  'headers',
  'traceparent',
  'createdAt',
] as const;

/** A value as compared: a Date by its time, microseconds and class; a Buffer by its bytes. */
function comparable(v: unknown): unknown {
  if (v instanceof Date) {
    const micros = (v as unknown as Record<symbol, unknown>)[SUB_MILLISECOND_MICROS] ?? 0;
    return { date: String(v.getTime()), micros };
  }
  if (Buffer.isBuffer(v)) return { bytes: v.toString('hex') };
  return v;
}

function expectSameEvents(actual: OutboxEvent[], expected: OutboxEvent[], what: string): void {
  expect(actual.length, what).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    for (const f of EVENT_FIELDS) {
      const a = actual[i]![f];
      const e = expected[i]![f];
      expect(comparable(a), `${what}, event ${i} (id ${String(expected[i]!.id)}), ${f}`).toStrictEqual(
        comparable(e),
      );
      if (e instanceof Date) expect(a, `${what}, event ${i}, ${f}`).toBeInstanceOf(Date);
    }
    // The per-event verdict follows from the values: the same for both.
    expect(checkEvent(actual[i]!), `${what}, event ${i}`).toBe(checkEvent(expected[i]!));
  }
}

async function insertRows(table: string, rows: Record<string, unknown>[], base: Record<string, unknown>) {
  const types = Object.fromEntries(
    (
      await db.query<{ attname: string; type: string }>(
        `SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute
          WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
        [table],
      )
    ).map((r) => [r.attname, r.type]),
  );
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    // Flushed at commit: the slot functions decode only WAL that is flushed (the cluster's default is off).
    await client.query('SET LOCAL synchronous_commit = on');
    for (const over of rows) {
      const row = { ...base, ...over };
      const cols = Object.keys(row);
      await client.query(
        `INSERT INTO ${table} (${cols.join(', ')}) OVERRIDING SYSTEM VALUE
         VALUES (${cols.map((c, i) => `$${i + 1}::${types[c]}`).join(', ')})`,
        cols.map((c) => row[c]),
      );
    }
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

beforeAll(async () => {
  await migrateDb(db);
  // A hand-made table: its constraints gone, columns of its own the relay does not read.
  await db.query(`ALTER TABLE outbox
      ALTER COLUMN event_id DROP NOT NULL, ALTER COLUMN aggregate_type DROP NOT NULL,
      ALTER COLUMN aggregate_id DROP NOT NULL, ALTER COLUMN event_type DROP NOT NULL,
      ALTER COLUMN content_type DROP NOT NULL, ALTER COLUMN headers DROP NOT NULL,
      ALTER COLUMN created_at DROP NOT NULL,
      DROP CONSTRAINT outbox_headers_object, DROP CONSTRAINT outbox_aggregate_type_not_empty,
      ADD COLUMN extra_point point DEFAULT '(1,2)', ADD COLUMN extra_numbers int4[] DEFAULT '{1,NULL,3}',
      ADD COLUMN extra_float float8 DEFAULT 'NaN', ADD COLUMN extra_money money DEFAULT 12.5`);
  for (const [table, columns] of Object.entries(TABLES)) {
    await db.query(`CREATE TABLE ${table} (${columns})`);
    await db.query(`CREATE PUBLICATION ${table}_pub FOR TABLE ${table} WITH (publish = 'insert')`);
  }
  await db.query(`SELECT pg_create_logical_replication_slot('${SLOT}', 'pgoutput')`);
  await insertRows('outbox', OUTBOX_ROWS, BASE);
  await insertRows('texts', OTHER_ROWS.texts!, {
    ...BASE,
    aggregate_id: '1',
    created_at: '2026-11-23 01:37:03',
  });
  await insertRows('numbers', OTHER_ROWS.numbers!, {
    ...BASE,
    aggregate_id: '1',
    event_type: 1,
    content_type: 1,
    created_at: '2026-11-23',
  });
  await insertRows('unreadable', OTHER_ROWS.unreadable!, BASE);
});

afterAll(() => {
  pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text', pgTimestamptz);
});

const ZONES = ['UTC', 'Europe/Amsterdam', 'America/St_Johns', 'Asia/Kathmandu'];

describe('pgoutput binary values decode to the text path’s events', () => {
  for (const parser of ['pg’s timestamptz parser', 'the microsecond timestamptz parser (the CLI’s)']) {
    describe(parser, () => {
      beforeAll(() => {
        if (parser.startsWith('the microsecond')) keepTimestampMicroseconds();
      });
      for (const zone of ZONES) {
        it(`the migrated outbox (hostile and extreme values, unread columns of other types), session time zone ${zone}`, async () => {
          const text = await peek('outbox_pub', false, zone);
          const binary = await peek('outbox_pub', true, zone);
          const textEvents = decodeAll('outbox', text);
          expect(textEvents.length).toBe(OUTBOX_ROWS.length);
          expectSameEvents(textEvents, viaLibrary(text), 'text vs pg-logical-replication');
          // Binary mode is on: the INSERTs differ and carry 'b' values.
          const inserts = binary.filter((m) => m[0] === 0x49);
          expect(inserts.every((m) => m[8] === 0x62)).toBe(true);
          expectSameEvents(decodeAll('outbox', binary), textEvents, 'binary vs text');
        });
      }
      for (const table of ['texts', 'numbers']) {
        it(`a table of other column types (${table}), each zone`, async () => {
          for (const zone of ZONES) {
            const text = await peek(`${table}_pub`, false, zone);
            const textEvents = decodeAll(table, text);
            expect(textEvents.length).toBe(OTHER_ROWS[table]!.length);
            expectSameEvents(
              textEvents,
              viaLibrary(text),
              `${table} ${zone}: text vs pg-logical-replication`,
            );
            expectSameEvents(
              decodeAll(table, await peek(`${table}_pub`, true, zone)),
              textEvents,
              `${table} ${zone}: binary vs text`,
            );
          }
        });
      }
    });
  }

  it('binary values become exactly the text PostgreSQL sends (UTC), parsers aside', async () => {
    const { builtins } = pg.types;
    const oids = [
      builtins.TIMESTAMPTZ,
      builtins.TIMESTAMP,
      builtins.DATE,
      builtins.INT8,
      builtins.INT4,
      builtins.INT2,
      builtins.OID,
      builtins.BOOL,
      builtins.NUMERIC,
      builtins.UUID,
      builtins.JSON,
      builtins.JSONB,
    ];
    const saved = oids.map((oid) => pg.types.getTypeParser(oid, 'text'));
    for (const oid of oids) pg.types.setTypeParser(oid, 'text', (t: string) => t);
    try {
      for (const [table, publication] of [
        ['outbox', 'outbox_pub'],
        ['texts', 'texts_pub'],
        ['numbers', 'numbers_pub'],
      ]) {
        const text = decodeAll(table!, await peek(publication!, false, 'UTC'));
        expect(text.every((e) => e.createdAt === null || typeof e.createdAt === 'string')).toBe(true);
        expectSameEvents(decodeAll(table!, await peek(publication!, true, 'UTC')), text, `${table}: text`);
      }
    } finally {
      for (const [i, oid] of oids.entries()) pg.types.setTypeParser(oid, 'text', saved[i]!);
    }
  });

  it('the relay asks for binary values only when it reads every column’s type in binary', async () => {
    const client = await db.pool.connect();
    try {
      expect(await binaryPossible(client, 'outbox_pub')).toBe(true);
      expect(await binaryPossible(client, 'texts_pub')).toBe(true);
      expect(await binaryPossible(client, 'numbers_pub')).toBe(true);
      expect(await binaryPossible(client, 'unreadable_pub')).toBe(false);
    } finally {
      client.release();
    }
  });

  it('a binary value of a type without a binary reader fails its row, naming the column (never a misread value)', async () => {
    const text = decodeAll('unreadable', await peek('unreadable_pub', false, 'UTC'));
    const binary = decodeAll('unreadable', await peek('unreadable_pub', true, 'UTC'));
    expect(text.map((e) => e.aggregateId)).toEqual(['10.0.0.1/8', '::1']);
    expect(text.map((e) => checkEvent(e))).toEqual([null, null]);
    for (const e of binary) {
      expect(e.aggregateId).toBeInstanceOf(UnreadableValue);
      expect(checkEvent(e)).toMatch(
        /^aggregate_id is a value of type OID 869 in binary format, which the relay does not read, not text\. Fix: /,
      );
    }
    // The columns it reads are still read.
    expect(binary.map((e) => e.eventId)).toEqual(text.map((e) => e.eventId));
  });
});
