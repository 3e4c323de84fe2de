import type { Config } from '../config/load.ts';
import { EXIT } from '../exit-codes.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import { STATUSES, type Status } from '../lifecycle/statuses.ts';
import { describeFilter, parseFilter } from './event-filter.ts';
import { OpsInputError } from './input-error.ts';
import { audit, confirm, type OpsContext } from './operator.ts';
import { type CopiesState, copiesState, countReplay, replayEvents } from './replay.ts';
import { formatProgress, type Progress } from './replay-progress.ts';

/** By default a replay copies what was (or should have been) relayed, not the failure lifecycle's rows. */
export const REPLAYABLE_BY_DEFAULT: readonly Status[] = ['published', 'pending'];
const FOLLOW_POLL_MS = 1000;

/**
 * `outbox-relay replay --since … [--until …] [filters] [--dry-run] [--yes] [--follow]`. Steps:
 *  1. count the window (copies of copies excluded unless --include-replays); --dry-run stops here;
 *  2. above --confirm-above rows, ask (or --yes; without a terminal the answer is no: exit 64);
 *  3. copy in batches, with progress (total, rate, ETA);
 *  4. --follow: wait until every copy is published (exit 0) or settled with dead ones (exit 69).
 * The command line (window, filters, statuses) is checked first, with no database (exit 64).
 */
export function parseReplayArgs(c: Config, args: string[]): EventFilter {
  if (args.length) throw new OpsInputError(`replay takes no arguments, got ${args.join(' ')}`);
  if (c.since === undefined)
    throw new OpsInputError('replay needs --since (e.g. --since 2h or --since 2026-11-20T14:00Z)');
  if (c.dryRun && c.replayFollow) throw new OpsInputError('--dry-run inserts nothing to --follow');
  return parseFilter(
    {
      status: c.status,
      since: c.since,
      until: c.until,
      aggregateType: c.aggregateType,
      aggregateId: c.aggregateId,
      eventType: c.eventType,
      eventId: c.eventId,
    },
    { allowed: STATUSES, fallback: REPLAYABLE_BY_DEFAULT },
  );
}

/** Runs a replay whose command line parseReplayArgs checked (before connecting). */
export async function replayCommand(ctx: OpsContext, filter: EventFilter): Promise<number> {
  const c = ctx.config;
  const window = { includeReplays: c.includeReplays };
  const planned = await countReplay(ctx.db, ctx.table, filter, window);
  const range = (r: { count: number; firstId: string | null; lastId: string | null }) =>
    r.count ? ` (original ids ${r.firstId}…${r.lastId})` : '';
  if (c.dryRun || planned.count === 0) {
    if (c.json) ctx.out(JSON.stringify({ dryRun: c.dryRun, ...planned, filter: describeFilter(filter) }));
    else ctx.out(`${planned.count} event(s) would be replayed${range(planned)}`);
    return EXIT.OK;
  }
  if (planned.count > c.confirmAbove) {
    const ok = await confirm(
      `Replay ${planned.count} event(s)${range(planned)}: insert ${planned.count} copies that the relay publishes again?`,
      c.yes,
    );
    if (!ok) {
      throw new OpsInputError(
        `not confirmed: ${planned.count} event(s) is more than --confirm-above ${c.confirmAbove} (pass --yes, or answer y on a terminal); nothing changed`,
      );
    }
  }
  const replayedAt = new Date();
  const copying = progressReporter(ctx, 'copied');
  const started = Date.now();
  const r = await replayEvents(ctx.db, ctx.table, filter, {
    ...window,
    batchSize: c.replayBatchSize,
    replayedAt,
    onBatch: (n) => copying({ done: n, total: Math.max(n, planned.count), elapsedMs: Date.now() - started }),
  });
  copying.end();
  await audit(
    ctx,
    'replay',
    {
      filter: describeFilter(filter),
      replayedAt: replayedAt.toISOString(),
      includeReplays: c.includeReplays,
    },
    r.count,
  );
  if (!c.json)
    ctx.out(
      `${r.count} event(s) replayed${range(r)}; copies marked x-replayed-at=${replayedAt.toISOString()}`,
    );
  let followed: CopiesState | null = null;
  if (c.replayFollow && r.ceiling !== null && r.count > 0) {
    followed = await follow(ctx, { ceiling: r.ceiling, replayedAt }, r.count);
  }
  if (c.json) {
    ctx.out(
      JSON.stringify({
        dryRun: false,
        count: r.count,
        firstId: r.firstId,
        lastId: r.lastId,
        replayedAt: replayedAt.toISOString(),
        filter: describeFilter(filter),
        ...(followed ? { copies: followed } : {}),
      }),
    );
  }
  return followed && followed.dead > 0 ? EXIT.UNAVAILABLE : EXIT.OK;
}

/** Polls the copies until none is on its way any more; progress = published of total. */
async function follow(
  ctx: OpsContext,
  run: { ceiling: string; replayedAt: Date },
  total: number,
): Promise<CopiesState> {
  const publishing = progressReporter(ctx, 'published');
  const started = Date.now();
  for (;;) {
    const s = await copiesState(ctx.db, ctx.table, run);
    publishing({ done: s.published, total, elapsedMs: Date.now() - started });
    if (s.inFlight === 0 && s.total >= total) {
      publishing.end();
      if (!ctx.config.json) {
        ctx.out(
          s.dead + s.discarded === 0
            ? `all ${s.published} copies published`
            : `${s.published} copies published, ${s.dead} dead, ${s.discarded} discarded (outbox-relay events list --status dead)`,
        );
      }
      return s;
    }
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
  }
}

/**
 * On a terminal: one line on stderr, rewritten in place. Otherwise (scripts, CI logs): an info
 * log line per update, at most every 5 s, so logs are not flooded.
 */
function progressReporter(ctx: OpsContext, verb: string): ((p: Progress) => void) & { end(): void } {
  const tty = process.stderr.isTTY === true;
  let last = 0;
  let shown = false;
  const report = (p: Progress) => {
    if (tty) {
      process.stderr.write(`\r\x1b[2K${formatProgress(verb, p)}`);
      shown = true;
    } else if (Date.now() - last >= 5000 || p.done >= p.total) {
      last = Date.now();
      ctx.log.info({ done: p.done, total: p.total }, `replay: ${formatProgress(verb, p)}`);
    }
  };
  return Object.assign(report, {
    end: () => {
      if (shown) process.stderr.write('\n');
    },
  });
}
