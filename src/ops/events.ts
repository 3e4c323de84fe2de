import type pg from 'pg';
import type { OperatorTarget } from '../compat/preset.ts';
import { operatorPresetOf } from '../compat/presets.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import type { OperatorEvents } from '../lifecycle/operator-events.ts';
import type { EventRecord } from '../lifecycle/queries.ts';
import type { Status } from '../lifecycle/statuses.ts';
import { OpsConflictError, OpsInputError, OpsNotFoundError } from './input-error.ts';
import { withClientTransaction } from './transaction.ts';

/** What picks the operator's events: the table, and with --compat debezium the preset's options. */
export type EventsTarget = OperatorTarget;

/**
 * The events operator commands, `status` and the console work on: the preset's
 * (compat/preset.ts OperatorPreset): the outbox table, or the Debezium preset's side table.
 */
export function operatorEventsOf(t: EventsTarget): OperatorEvents {
  return operatorPresetOf(t).events;
}

/** The topic an event of this aggregate type is routed to, as the relay routes it; throws when none. */
export function topicOfEvents(t: EventsTarget): (aggregateType: string, eventType: string) => string {
  const p = operatorPresetOf(t);
  return (aggregateType, eventType) => p.topicOf(aggregateType, eventType);
}

/**
 * Every column of an event as [name, text] pairs, in table order (headers and payload apart: each
 * reader renders them its own way). `none` stands for NULL. With --compat debezium `id` is the
 * insert's WAL position and `columns` the Debezium row as the WAL carried it. For `events show`
 * and the console.
 */
export function eventColumns(e: EventRecord, none: string): [string, string][] {
  const iso = (d: Date | null) => d?.toISOString() ?? none;
  return [
    ['id', e.id],
    ['event_id', e.event_id ?? none],
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
    ...(e.columns ? ([['columns', JSON.stringify(e.columns)]] as [string, string][]) : []),
  ];
}

/** One event with every column and its truthful status; an operator error when it does not exist. */
export async function showEvent(db: pg.ClientBase, events: OperatorEvents, id: string): Promise<EventRecord> {
  const e = await events.read(db, id);
  if (!e) throw new OpsNotFoundError(`event ${id} does not exist in ${events.table}`);
  return e;
}

/**
 * The rows an action applies to: the named ids — every one must exist and be in an allowed
 * status, else nothing changes — or the filter's matches. The action's UPDATE re-checks the status
 * (resolveEvents).
 */
export async function selectTargets(
  db: pg.ClientBase,
  events: OperatorEvents,
  target: { ids: string[] } | { filter: EventFilter },
  allowed: readonly Status[],
): Promise<string[]> {
  if ('ids' in target) {
    const rows = await events.statusesOf(db, target.ids);
    const found = new Map(rows.map((x) => [x.id, x.status]));
    const missing = target.ids.filter((id) => !found.has(id));
    if (missing.length)
      throw new OpsNotFoundError(`no such event in ${events.table}: ${missing.join(', ')} (nothing changed)`);
    const wrong = rows.filter((x) => !allowed.includes(x.status as Status));
    if (wrong.length) {
      throw new OpsInputError(
        `${wrong.map((x) => `event ${x.id} is ${x.status}`).join(', ')}; only ${allowed.join('/')} events qualify (nothing changed)`,
      );
    }
    return rows.map((x) => x.id);
  }
  return events.idsMatching(db, target.filter);
}

/**
 * Resend or discard exactly these events, or none: the guarded UPDATE runs in a transaction and
 * its row count must be the number of ids. Fewer means some changed status since they were
 * selected (the sweeper published one, another operator resolved it): rolled back, a race
 * (OpsConflictError, exit 75), nothing changed — run the command again. Returns the rows changed.
 */
export async function resolveEvents(
  db: pg.ClientBase,
  events: OperatorEvents,
  action: 'resend' | 'discard',
  ids: readonly string[],
  resetAttempts: boolean,
): Promise<number> {
  if (ids.length === 0) return 0;
  return withClientTransaction(db, async () => {
    const n =
      action === 'resend' ? await events.resend(db, ids, resetAttempts) : await events.discard(db, ids);
    if (n !== ids.length)
      throw new OpsConflictError(
        `${action} matched ${n} of the ${ids.length} event(s) selected: ${ids.length - n} changed status meanwhile (e.g. the sweeper published them); nothing changed — look again (events list) and run it again`,
      );
    return n;
  });
}
