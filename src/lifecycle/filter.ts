import type { Status } from './statuses.ts';

/** Which rows an operator command looks at. Times: since inclusive, until exclusive. */
export interface EventFilter {
  statuses: Status[];
  since?: Date;
  until?: Date;
  aggregateType?: string;
  aggregateId?: string;
  eventType?: string;
  /** Text in last_error, case-insensitive. */
  errorContains?: string;
  eventId?: string;
  /** Paging by id: rows with id > afterId. */
  afterId?: string;
}

/** A parameterised WHERE clause (without the keyword) for the filter; `$first` is its first parameter. */
export function filterSql(f: EventFilter, first = 1): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const parts: string[] = [];
  const add = (clause: (p: string) => string, value: unknown) => {
    params.push(value);
    parts.push(clause(`$${first + params.length - 1}`));
  };
  add((p) => `status = ANY(${p}::text[])`, f.statuses);
  if (f.since) add((p) => `created_at >= ${p}::timestamptz`, f.since.toISOString());
  if (f.until) add((p) => `created_at < ${p}::timestamptz`, f.until.toISOString());
  if (f.aggregateType !== undefined) add((p) => `aggregate_type = ${p}`, f.aggregateType);
  if (f.aggregateId !== undefined) add((p) => `aggregate_id = ${p}`, f.aggregateId);
  if (f.eventType !== undefined) add((p) => `event_type = ${p}`, f.eventType);
  // strpos, not LIKE: the operator's text has no wildcards to escape.
  if (f.errorContains !== undefined)
    add((p) => `strpos(lower(last_error), lower(${p})) > 0`, f.errorContains);
  if (f.eventId !== undefined) add((p) => `event_id = ${p}::uuid`, f.eventId);
  if (f.afterId !== undefined) add((p) => `id > ${p}::bigint`, f.afterId);
  return { sql: parts.join(' AND '), params };
}
