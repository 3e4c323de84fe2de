import type { Config } from '../config/load.ts';
import { OpsInputError } from './input-error.ts';
import { parseTime } from './time-filter.ts';

/** The outbox row statuses (sql/000001_outbox.sql's CHECK constraint). */
export const STATUSES = ['pending', 'published', 'failed', 'dead', 'parked', 'discarded'] as const;
export type Status = (typeof STATUSES)[number];

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

/** The filter options as the config gives them (flags, file, environment). */
export type FilterOptions = Partial<
  Pick<
    Config,
    | 'status'
    | 'since'
    | 'until'
    | 'aggregateType'
    | 'aggregateId'
    | 'eventType'
    | 'errorContains'
    | 'eventId'
    | 'afterId'
  >
>;

export interface FilterRules {
  /** Statuses the command may touch. */
  allowed: readonly Status[];
  /** Used when --status is not given. */
  fallback: readonly Status[];
  now?: Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function parseFilter(o: FilterOptions, rules: FilterRules): EventFilter {
  const now = rules.now ?? new Date();
  const statuses = o.status?.length ? o.status : [...rules.fallback];
  for (const s of statuses) {
    if (!(STATUSES as readonly string[]).includes(s)) {
      throw new OpsInputError(`unknown status ${JSON.stringify(s)} (known: ${STATUSES.join(', ')})`);
    }
    if (!rules.allowed.includes(s as Status)) {
      throw new OpsInputError(
        `status ${JSON.stringify(s)} is not allowed here (allowed: ${rules.allowed.join(', ')})`,
      );
    }
  }
  const f: EventFilter = { statuses: [...new Set(statuses)] as Status[] };
  if (o.since !== undefined) f.since = parseTime(o.since, now);
  if (o.until !== undefined) f.until = parseTime(o.until, now);
  if (f.since && f.until && f.since >= f.until) {
    throw new OpsInputError(
      `--since (${f.since.toISOString()}) must be before --until (${f.until.toISOString()})`,
    );
  }
  if (o.aggregateType !== undefined) f.aggregateType = o.aggregateType;
  if (o.aggregateId !== undefined) f.aggregateId = o.aggregateId;
  if (o.eventType !== undefined) f.eventType = o.eventType;
  if (o.errorContains !== undefined) {
    if (o.errorContains === '') throw new OpsInputError('--error-contains needs some text');
    f.errorContains = o.errorContains;
  }
  if (o.eventId !== undefined) {
    if (!UUID.test(o.eventId))
      throw new OpsInputError(`--event-id ${JSON.stringify(o.eventId)} is not a UUID`);
    f.eventId = o.eventId.toLowerCase();
  }
  if (o.afterId !== undefined) f.afterId = String(o.afterId);
  return f;
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

/** The filter in words, for confirmations and audit logs. */
export function describeFilter(f: EventFilter): Record<string, string> {
  const d: Record<string, string> = { status: f.statuses.join(',') };
  if (f.since) d.since = f.since.toISOString();
  if (f.until) d.until = f.until.toISOString();
  if (f.aggregateType !== undefined) d.aggregateType = f.aggregateType;
  if (f.aggregateId !== undefined) d.aggregateId = f.aggregateId;
  if (f.eventType !== undefined) d.eventType = f.eventType;
  if (f.errorContains !== undefined) d.errorContains = f.errorContains;
  if (f.eventId !== undefined) d.eventId = f.eventId;
  if (f.afterId !== undefined) d.afterId = f.afterId;
  return d;
}
