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

/** An identifier as an operator would type it (in a fix line, a GRANT): quoted only when it has to be. */
export function sqlName(...parts: string[]): string {
  return parts.map((p) => (/^[a-z_][a-z0-9_$]*$/.test(p) ? p : `"${p.replace(/"/g, '""')}"`)).join('.');
}
