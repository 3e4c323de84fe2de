import pg from 'pg';

/** Quotes an identifier from configuration; never concatenate a raw one into SQL. */
export function ident(name: string): string {
  return pg.escapeIdentifier(name);
}

/** schema.table, both quoted. */
export function qualified(schema: string, table: string): string {
  return `${ident(schema)}.${ident(table)}`;
}
