import pg from 'pg';

/** Quotes an identifier from configuration; never concatenate a raw one into SQL. */
export function ident(name: string): string {
  return pg.escapeIdentifier(name);
}

/** schema.table, both quoted. */
export function qualified(schema: string, table: string): string {
  return `${ident(schema)}.${ident(table)}`;
}

/** A quoted schema.table's companion object (suffix appended to the table's name, same schema). */
export function companion(qualifiedTable: string, suffix: string): string {
  if (!/^[a-z0-9_]+$/.test(suffix) || !qualifiedTable.endsWith('"'))
    throw new Error(`bad companion ${suffix}`);
  return `${qualifiedTable.slice(0, -1)}${suffix}"`;
}
