import type { Config } from '../config/load.ts';
import { EXIT } from '../exit-codes.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import type { EventRecord } from '../lifecycle/queries.ts';
import { RESOLVABLE, STATUSES, UNHEALTHY } from '../lifecycle/statuses.ts';
import { describeFilter, type FilterOptions, parseFilter } from './event-filter.ts';
import { eventColumns, resolveEvents, selectTargets, showEvent } from './events.ts';
import { formatPairs, formatTable, renderPayload, truncate } from './format.ts';
import { OpsInputError, parseIds } from './input-error.ts';
import { audit, confirm, type OpsContext } from './operator.ts';

export const EVENTS_SUBCOMMANDS = ['list', 'count', 'show', 'resend', 'discard'] as const;

/** An `events` command line, checked: what to do, with nothing left to parse. */
export type EventsInput =
  | { sub: 'list' | 'count'; filter: EventFilter }
  | { sub: 'show'; id: string }
  | { sub: 'resend' | 'discard'; ids: string[]; filter: EventFilter | null };

/**
 * Everything about an `events` command line that needs no database (subcommand, ids, filters,
 * times, statuses): checked before connecting, so bad input exits 64 even while the database is
 * down. Whether the ids exist and are in the right state is checked by the command.
 */
export function parseEventsArgs(c: Config, args: string[]): EventsInput {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'list':
    case 'count':
      noPositionals(sub, rest);
      return { sub, filter: parseFilter(filterOptions(c), { allowed: STATUSES, fallback: UNHEALTHY }) };
    case 'show': {
      const ids = parseIds(rest);
      if (ids.length !== 1) throw new OpsInputError('events show takes exactly one event id');
      return { sub, id: ids[0]! };
    }
    case 'resend':
    case 'discard':
      return { sub, ...resolveTargets(c, sub, rest) };
    default:
      throw new OpsInputError(
        `${sub === undefined ? 'missing' : `unknown`} events subcommand${sub ? ` ${JSON.stringify(sub)}` : ''} (use ${EVENTS_SUBCOMMANDS.join(', ')})`,
      );
  }
}

/**
 * `outbox-relay events <list|count|show|resend|discard> …`, its command line already checked. With
 * --compat debezium the same commands work on the side table (ctx.events), ids being WAL positions.
 */
export async function eventsCommand(ctx: OpsContext, input: EventsInput): Promise<number> {
  switch (input.sub) {
    case 'list':
      return list(ctx, input.filter);
    case 'count':
      return count(ctx, input.filter);
    case 'show':
      return show(ctx, input.id);
    case 'resend':
    case 'discard':
      return resolve(ctx, input.sub, input);
  }
}

function filterOptions(c: Config): FilterOptions {
  return {
    status: c.status,
    since: c.since,
    until: c.until,
    aggregateType: c.aggregateType,
    aggregateId: c.aggregateId,
    eventType: c.eventType,
    errorContains: c.errorContains,
    afterId: c.afterId,
  };
}

function noPositionals(sub: string, rest: string[]): void {
  if (rest.length) throw new OpsInputError(`events ${sub} takes no arguments, got ${rest.join(' ')}`);
}

function summary(e: EventRecord): Record<string, unknown> {
  return {
    id: e.id,
    eventId: e.event_id,
    status: e.status,
    aggregateType: e.aggregate_type,
    aggregateId: e.aggregate_id,
    eventType: e.event_type,
    attempts: e.attempts,
    createdAt: e.created_at.toISOString(),
    nextAttemptAt: e.next_attempt_at?.toISOString() ?? null,
    lastError: e.last_error,
    ...(e.columns ? { columns: e.columns } : {}),
  };
}

async function list(ctx: OpsContext, f: EventFilter): Promise<number> {
  const limit = ctx.config.limit;
  const rows = await ctx.events.list(ctx.db, f, limit);
  const nextAfterId = rows.length === limit ? rows[rows.length - 1]!.id : null;
  if (ctx.config.json) {
    ctx.out(JSON.stringify({ events: rows.map(summary), nextAfterId }));
    return EXIT.OK;
  }
  ctx.out(
    formatTable(
      [
        'id',
        'status',
        'aggregate_type',
        'aggregate_id',
        'event_type',
        'attempts',
        'created_at',
        'last_error',
      ],
      rows.map((e) => [
        e.id,
        e.status,
        e.aggregate_type,
        e.aggregate_id,
        e.event_type,
        String(e.attempts),
        e.created_at.toISOString(),
        truncate(e.last_error ?? '', 60),
      ]),
    ),
  );
  ctx.out(
    nextAfterId
      ? `${rows.length} event(s); next page: --after-id ${nextAfterId}`
      : `${rows.length} event(s); no more`,
  );
  return EXIT.OK;
}

async function count(ctx: OpsContext, f: EventFilter): Promise<number> {
  const by = await ctx.events.count(ctx.db, f);
  const total = Object.values(by).reduce((a, b) => a + b, 0);
  if (ctx.config.json) {
    ctx.out(JSON.stringify({ count: total, byStatus: by }));
    return EXIT.OK;
  }
  ctx.out(
    formatTable(
      ['status', 'count'],
      [...f.statuses.map((s) => [s, String(by[s] ?? 0)]), ['total', String(total)]],
    ),
  );
  return EXIT.OK;
}

async function show(ctx: OpsContext, id: string): Promise<number> {
  const e = await showEvent(ctx.db, ctx.events, id);
  const payload = renderPayload(e.payload);
  if (ctx.config.json) {
    const { payload: _raw, ...columns } = e;
    ctx.out(
      JSON.stringify({
        ...columns,
        created_at: e.created_at.toISOString(),
        next_attempt_at: e.next_attempt_at?.toISOString() ?? null,
        published_at: e.published_at?.toISOString() ?? null,
        payload:
          payload.encoding === 'json'
            ? { encoding: 'json', value: payload.value }
            : { encoding: payload.encoding, value: payload.encoding === 'null' ? null : payload.text },
      }),
    );
    return EXIT.OK;
  }
  const columns = eventColumns(e, '-');
  // The headers as JSON, after content_type (where the table has them).
  columns.splice(6, 0, ['headers', JSON.stringify(e.headers)]);
  ctx.out(formatPairs(columns));
  const bytes = e.payload?.length ?? 0;
  ctx.out(`payload (${payload.encoding}, ${bytes} bytes):\n${payload.text}`);
  return EXIT.OK;
}

/** A filter that names no criterion would select every failed and dead event: that takes --all. */
function hasCriterion(c: Config): boolean {
  return [
    c.status?.length ? c.status : undefined,
    c.since,
    c.until,
    c.aggregateType,
    c.aggregateId,
    c.eventType,
    c.errorContains,
  ].some((v) => v !== undefined);
}

/** resend / discard: ids, or --filter with the list filters (or --all); failed and dead events only. */
function resolveTargets(
  c: Config,
  action: 'resend' | 'discard',
  rest: string[],
): { ids: string[]; filter: EventFilter | null } {
  const ids = parseIds(rest);
  const byFilter = c.filter || c.all;
  if (ids.length > 0 && byFilter)
    throw new OpsInputError(`events ${action}: give event ids or --filter, not both`);
  if (ids.length === 0 && !byFilter) {
    throw new OpsInputError(
      `events ${action}: give event ids, or --filter with --status/--since/… to select them`,
    );
  }
  if (byFilter && !c.all && !hasCriterion(c)) {
    throw new OpsInputError(
      `events ${action} --filter: name a filter (--status, --since, --until, --aggregate-type, --aggregate-id, --event-type, --error-contains), or pass --all for every failed and dead event`,
    );
  }
  const filter = byFilter
    ? parseFilter(filterOptions(c), { allowed: RESOLVABLE, fallback: RESOLVABLE })
    : null;
  return { ids, filter };
}

async function resolve(
  ctx: OpsContext,
  action: 'resend' | 'discard',
  { ids, filter }: { ids: string[]; filter: EventFilter | null },
): Promise<number> {
  const c = ctx.config;
  const what = filter ? { filter: describeFilter(filter) } : { ids };
  // Validates before anything changes: every named id exists and is failed or dead.
  const plan = await selectTargets(ctx.db, ctx.events, filter ? { filter } : { ids }, RESOLVABLE);
  const shown = plan.length > 10 ? `${plan.slice(0, 10).join(', ')}, …` : plan.join(', ');
  if (c.dryRun) {
    if (c.json) ctx.out(JSON.stringify({ action, dryRun: true, count: plan.length, ids: plan }));
    else
      ctx.out(
        `${plan.length} event(s) would be ${action === 'resend' ? 'resent' : 'discarded'}${plan.length ? ` (${shown})` : ''}`,
      );
    return EXIT.OK;
  }
  if (plan.length === 0) {
    report(ctx, action, 0);
    return EXIT.OK;
  }
  // discard always asks; a filtered resend asks when it touches more than --confirm-above rows.
  const ask =
    action === 'discard'
      ? `Discard ${plan.length} event(s) (${shown}) for good?`
      : filter && plan.length > c.confirmAbove
        ? `Resend ${plan.length} event(s) (${shown})?`
        : null;
  if (ask && !(await confirm(ask, c.yes))) {
    throw new OpsInputError('not confirmed (pass --yes, or answer y on a terminal); nothing changed');
  }
  // Guarded by status, all or nothing: if the sweeper published one meanwhile, nothing changes (OpsConflictError: exit 75, run it again).
  const n = await resolveEvents(ctx.db, ctx.events, action, plan, c.resetAttempts);
  await audit(ctx, action, action === 'resend' ? { ...what, resetAttempts: c.resetAttempts } : what, n);
  report(ctx, action, n);
  return EXIT.OK;
}

function report(ctx: OpsContext, action: 'resend' | 'discard', n: number): void {
  if (ctx.config.json) ctx.out(JSON.stringify({ action, count: n }));
  else ctx.out(action === 'resend' ? `${n} event(s) due again now` : `${n} event(s) discarded`);
}
