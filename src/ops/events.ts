import type pg from 'pg';
import type { EventFilter } from '../lifecycle/filter.ts';
import { type EventRecord, idsMatching, readEvent, statusesOf } from '../lifecycle/queries.ts';
import type { Status } from '../lifecycle/statuses.ts';
import { OpsInputError } from './input-error.ts';

/**
 * Every column of an event as [name, text] pairs, in table order (headers and payload apart: each
 * reader renders them its own way). `none` stands for NULL. For `events show` and the console.
 */
export function eventColumns(e: EventRecord, none: string): [string, string][] {
  const iso = (d: Date | null) => d?.toISOString() ?? none;
  return [
    ['id', e.id],
    ['event_id', e.event_id],
    ['aggregate_type', e.aggregate_type],
    ['aggregate_id', e.aggregate_id],
    ['event_type', e.event_type],
    ['content_type', e.content_type],
    ['traceparent', e.traceparent ?? none],
    ['created_at', iso(e.created_at)],
    ['status', e.status],
    ['attempts', String(e.attempts)],
    ['next_attempt_at', iso(e.next_attempt_at)],
    ['published_at', iso(e.published_at)],
    ['last_error', e.last_error ?? none],
  ];
}

/** One event with every column and its truthful status; an operator error when it does not exist. */
export async function showEvent(db: pg.ClientBase, table: string, id: string): Promise<EventRecord> {
  const e = await readEvent(db, table, id);
  if (!e) throw new OpsInputError(`event ${id} does not exist in ${table}`);
  return e;
}

/**
 * The rows an action applies to: the named ids — every one must exist and be in an allowed
 * status, else nothing changes — or the filter's matches. The action's UPDATE re-checks the status
 * (lifecycle/transitions.ts).
 */
export async function selectTargets(
  db: pg.ClientBase,
  table: string,
  target: { ids: string[] } | { filter: EventFilter },
  allowed: readonly Status[],
): Promise<string[]> {
  if ('ids' in target) {
    const rows = await statusesOf(db, table, target.ids);
    const found = new Map(rows.map((x) => [x.id, x.status]));
    const missing = target.ids.filter((id) => !found.has(id));
    if (missing.length) throw new OpsInputError(`no such event: ${missing.join(', ')} (nothing changed)`);
    const wrong = rows.filter((x) => !allowed.includes(x.status as Status));
    if (wrong.length) {
      throw new OpsInputError(
        `${wrong.map((x) => `event ${x.id} is ${x.status}`).join(', ')}; only ${allowed.join('/')} events qualify (nothing changed)`,
      );
    }
    return rows.map((x) => x.id);
  }
  return idsMatching(db, table, target.filter);
}
