import { EXIT } from '../cli/exit-codes.ts';
import { describeFilter, parseFilter, STATUSES, type Status } from './event-filter.ts';
import { OpsInputError } from './input-error.ts';
import { audit, type OpsContext } from './operator.ts';
import { replayEvents } from './replay.ts';

/** By default a replay copies what was (or should have been) relayed, not the failure lifecycle's rows. */
export const REPLAYABLE_BY_DEFAULT: readonly Status[] = ['published', 'pending'];

/** `outbox-relay replay --since … [--until …] [filters] [--dry-run]` */
export async function replayCommand(ctx: OpsContext, args: string[]): Promise<number> {
  const c = ctx.config;
  if (args.length) throw new OpsInputError(`replay takes no arguments, got ${args.join(' ')}`);
  if (c.since === undefined)
    throw new OpsInputError('replay needs --since (e.g. --since 2h or --since 2026-11-20T14:00Z)');
  const filter = parseFilter(
    {
      status: c.status,
      since: c.since,
      until: c.until,
      aggregateType: c.aggregateType,
      aggregateId: c.aggregateId,
      eventId: c.eventId,
    },
    { allowed: STATUSES, fallback: REPLAYABLE_BY_DEFAULT },
  );
  const replayedAt = new Date();
  const r = await replayEvents(ctx.db, ctx.table, filter, {
    batchSize: c.replayBatchSize,
    dryRun: c.dryRun,
    replayedAt,
    onBatch: (n) => ctx.log.info({ copied: n }, 'replay progress'),
  });
  if (!c.dryRun)
    await audit(
      ctx,
      'replay',
      { filter: describeFilter(filter), replayedAt: replayedAt.toISOString() },
      r.count,
    );
  if (c.json) ctx.out(JSON.stringify({ dryRun: c.dryRun, ...r, filter: describeFilter(filter) }));
  else {
    const range = r.count ? ` (original ids ${r.firstId}…${r.lastId})` : '';
    ctx.out(
      c.dryRun ? `${r.count} event(s) would be replayed${range}` : `${r.count} event(s) replayed${range}`,
    );
  }
  return EXIT.OK;
}
