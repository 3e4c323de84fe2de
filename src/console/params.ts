import type { FilterOptions } from '../ops/event-filter.ts';
import { OpsInputError, parseIds } from '../ops/input-error.ts';

/** The filter fields of a console form or query string, as typed (validated by parseFilter). */
export interface FilterParams {
  status: string[];
  since?: string;
  until?: string;
  aggregateType?: string;
  aggregateId?: string;
  eventType?: string;
  errorContains?: string;
  afterId?: string;
}

const text = (v: string | null) => (v === null || v.trim() === '' ? undefined : v.trim());

/** Query string or form body → FilterParams; `after_id` must be an id. */
export function filterParams(q: URLSearchParams): FilterParams {
  const p: FilterParams = { status: q.getAll('status').filter((s) => s !== '') };
  const set = <K extends keyof FilterParams>(k: K, v: FilterParams[K] | undefined) => {
    if (v !== undefined) p[k] = v;
  };
  set('since', text(q.get('since')));
  set('until', text(q.get('until')));
  set('aggregateType', q.get('aggregate_type') ?? undefined);
  set('aggregateId', q.get('aggregate_id') ?? undefined);
  if (p.aggregateType === '') delete p.aggregateType;
  if (p.aggregateId === '') delete p.aggregateId;
  set('eventType', text(q.get('event_type')));
  set('errorContains', text(q.get('error_contains')));
  const after = text(q.get('after_id'));
  if (after !== undefined) set('afterId', parseIds([after])[0]);
  return p;
}

/** FilterParams as the ops filter parser takes them (the CLI's options). */
export function filterOptions(p: FilterParams): FilterOptions {
  return {
    status: p.status,
    since: p.since,
    until: p.until,
    aggregateType: p.aggregateType,
    aggregateId: p.aggregateId,
    eventType: p.eventType,
    errorContains: p.errorContains,
    // parseFilter keeps the id as text (String(afterId)); ids above 2^53 must not pass through a number.
    afterId: p.afterId as unknown as number | undefined,
  };
}

/** One id from a form or path; OpsInputError when it is not one. */
export function oneId(v: string | null | undefined): string {
  const ids = parseIds(v ? [v] : []);
  if (ids.length !== 1) throw new OpsInputError('expected one event id');
  return ids[0]!;
}
