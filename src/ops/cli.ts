import pg from 'pg';
import type { Config } from '../config/load.ts';
import type { Command } from '../config/options.ts';
import type { Logger } from '../observability/logger.ts';
import { eventsCommand } from './events-command.ts';
import { OpsInputError } from './input-error.ts';
import { opsContext } from './operator.ts';
import { replayCommand } from './replay-command.ts';
import { slotCommand } from './slot-command.ts';
import { statusCommand } from './status-command.ts';

export type OpsCommand = Extract<Command, 'status' | 'events' | 'replay' | 'slot'>;

export const OPS_COMMANDS: readonly OpsCommand[] = ['status', 'events', 'replay', 'slot'];

export function isOpsCommand(c: Command): c is OpsCommand {
  return (OPS_COMMANDS as readonly string[]).includes(c);
}

const RUN = { status: statusCommand, events: eventsCommand, replay: replayCommand, slot: slotCommand };

/**
 * Runs an operator command on one plain connection (never the replication one), so it works
 * beside a running relay. Bad input (OpsInputError) exits 64 and changes nothing.
 */
export async function runOpsCommand(
  cmd: OpsCommand,
  args: string[],
  config: Config,
  log: Logger,
): Promise<number> {
  const client = new pg.Client({
    connectionString: config.databaseUrl,
    application_name: `outbox-relay ${cmd}`,
  });
  await client.connect();
  try {
    return await RUN[cmd](opsContext(config, client, log), args);
  } catch (e) {
    // Reported once by the CLI (exit 64), with this command's help page as the hint.
    if (e instanceof OpsInputError && e.help === undefined) {
      e.help = cmd === 'events' || cmd === 'slot' ? [cmd, args[0]].filter(Boolean).join(' ') : cmd;
    }
    throw e;
  } finally {
    await client.end();
  }
}
