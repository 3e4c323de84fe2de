import type pg from 'pg';
import type { EventFilter } from '../lifecycle/filter.ts';
import type { OperatorEvents } from '../lifecycle/operator-events.ts';
import { RESOLVABLE, STATUSES } from '../lifecycle/statuses.ts';
import { describeFilter, parseFilter } from '../ops/event-filter.ts';
import { resolveEvents, selectTargets } from '../ops/events.ts';
import { OpsInputError } from '../ops/input-error.ts';
import { audit, type OpsContext } from '../ops/operator.ts';
import { REPLAYABLE_BY_DEFAULT } from '../ops/replay-command.ts';
import type { Action } from './pages/actions.ts';
import { BASE } from './pages/layout.ts';
import { type FilterParams, filterOptions, filterParams, oneId } from './params.ts';

/**
 * The console's changes, through the CLI's functions (src/ops/): a resend or discard of one event
 * or of a filter's events — never more than the preview showed, all of them or none, with the
 * CLI's audit line plus who in the console did it — and the filter a replay runs over. Reached
 * only through auth.ts' gate (token, CSRF, login); the replay itself runs in replay-jobs.ts.
 */

export function actionOf(v: string | null): Action {
  if (v === 'resend' || v === 'discard') return v;
  throw new OpsInputError(`unknown action ${JSON.stringify(v)} (resend or discard)`);
}

/** A replay's window and statuses, as `outbox-relay replay` parses them; `since` is required. */
export function replayFilter(params: FilterParams): EventFilter {
  if (!params.since) throw new OpsInputError('a replay needs since (e.g. 2h, or 2026-11-20T14:00Z)');
  return parseFilter(filterOptions(params), { allowed: STATUSES, fallback: REPLAYABLE_BY_DEFAULT });
}

export interface ApplyDeps {
  events: OperatorEvents;
  /** The CLI's operator context on `db`, for its audit log. */
  opsContext: (db: pg.ClientBase) => OpsContext;
  /** Called once the change is made (the overview's counts are stale). */
  changed: () => void;
}

/** Applies a confirmed resend or discard form; `via` says who (auth.ts' whoOf). */
export async function applyAction(
  d: ApplyDeps,
  db: pg.ClientBase,
  action: Action,
  form: URLSearchParams,
  via: Record<string, unknown>,
) {
  const expected = Number(form.get('expected') ?? 0);
  let ids: string[];
  let what: Record<string, unknown>;
  let backTo: string;
  if (form.get('scope') === 'filter') {
    const filter = parseFilter(filterOptions(filterParams(form)), {
      allowed: RESOLVABLE,
      fallback: RESOLVABLE,
    });
    const through = BigInt(oneId(form.get('through_id')));
    // Never more than the preview showed: rows that matched later are left for another look.
    ids = (await selectTargets(db, d.events, { filter }, RESOLVABLE)).filter((id) => BigInt(id) <= through);
    what = { filter: describeFilter(filter), throughId: through.toString() };
    backTo = `${BASE}/events`;
  } else {
    ids = [oneId(form.get('id'))];
    await selectTargets(db, d.events, { ids }, RESOLVABLE);
    what = { ids };
    backTo = `${BASE}/events/${ids[0]}`;
  }
  const resetAttempts = form.get('reset_attempts') === '1';
  // As in the CLI: guarded by status, all of these ids or none (a row published since the
  // selection just above rolls it back: an error page, nothing changed).
  const changed = await resolveEvents(db, d.events, action, ids, resetAttempts);
  // The CLI's audit line, plus who in the console did it.
  await audit(
    d.opsContext(db),
    action,
    { ...(action === 'resend' ? { ...what, resetAttempts } : what), ...via },
    changed,
  );
  d.changed();
  return { changed, expected, backTo };
}
