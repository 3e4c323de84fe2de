import type pg from 'pg';
import type { TableColumn } from './event-router.ts';

/** A table's columns by name: type and NOT NULL, from the catalog (the Debezium preset's schemas). */
export async function tableColumns(
  db: pg.Pool | pg.ClientBase,
  schema: string,
  table: string,
): Promise<Map<string, TableColumn>> {
  const r = await db.query<{ name: string; type_oid: number; not_null: boolean }>(
    `SELECT a.attname AS name, a.atttypid::int AS type_oid, a.attnotnull AS not_null
       FROM pg_attribute a
       JOIN pg_class c ON c.oid = a.attrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY a.attnum`,
    [schema, table],
  );
  return new Map(r.rows.map((c) => [c.name, { name: c.name, typeOid: c.type_oid, notNull: c.not_null }]));
}
