import type { Config } from '../config/load.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import { STATUSES, type Status } from '../lifecycle/statuses.ts';
import { OpsInputError } from './input-error.ts';
import { parseTime } from './time-filter.ts';

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
