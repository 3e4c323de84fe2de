import { EXIT } from '../exit-codes.ts';
import { OpsInputError } from './input-error.ts';
import type { OpsContext } from './operator.ts';
import { readStatus } from './status.ts';
import { formatStatus } from './status-format.ts';
import { evaluate } from './status-report.ts';

/** Exit code of `status` when something is wrong (a health probe's "unhealthy"). */
export const STATUS_UNHEALTHY = EXIT.UNAVAILABLE;

/** `outbox-relay status`: 0 healthy, 69 something is wrong (the problems are listed). */
export async function statusCommand(ctx: OpsContext, args: string[]): Promise<number> {
  if (args.length) throw new OpsInputError(`status takes no arguments, got ${args.join(' ')}`);
  const report = evaluate(await readStatus(ctx.db, ctx.config));
  ctx.out(ctx.config.json ? JSON.stringify(report) : formatStatus(report));
  return report.healthy ? EXIT.OK : STATUS_UNHEALTHY;
}
