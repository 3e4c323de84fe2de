import pg from 'pg';
import type { Config } from '../config/load.ts';
import type { Command } from '../config/options.ts';
import type { Logger } from '../observability/logger.ts';
import { eventsCommand, parseEventsArgs } from './events-command.ts';
import { OpsInputError } from './input-error.ts';
import { type OpsContext, opsContext } from './operator.ts';
import { parseReplayArgs, replayCommand } from './replay-command.ts';
import { parseSlotArgs, slotCommand } from './slot-command.ts';
import { statusCommand } from './status-command.ts';

export type OpsCommand = Extract<Command, 'status' | 'events' | 'replay' | 'slot'>;

export const OPS_COMMANDS: readonly OpsCommand[] = ['status', 'events', 'replay', 'slot'];

export function isOpsCommand(c: Command): c is OpsCommand {
  return (OPS_COMMANDS as readonly string[]).includes(c);
}

/**
 * The command line first, with no database: bad input exits 64 even while the database is down
 * (and 69 says only that it is). Returns the command, ready to run on a connection.
 */
function prepare(cmd: OpsCommand, args: string[], config: Config): (ctx: OpsContext) => Promise<number> {
  switch (cmd) {
    case 'events': {
      const input = parseEventsArgs(config, args);
      return (ctx) => eventsCommand(ctx, input);
    }
    case 'replay': {
      const filter = parseReplayArgs(config, args);
      return (ctx) => replayCommand(ctx, filter);
    }
    case 'slot':
      parseSlotArgs(args);
      return slotCommand;
    case 'status':
      return (ctx) => statusCommand(ctx, args);
  }
}

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
  try {
    const command = prepare(cmd, args, config);
    const client = new pg.Client({
      connectionString: config.databaseUrl,
      application_name: `outbox-relay ${cmd}`,
    });
    await client.connect();
    try {
      return await command(opsContext(config, client, log));
    } finally {
      await client.end();
    }
  } catch (e) {
    // Reported once by the CLI (exit 64), with this command's help page as the hint.
    if (e instanceof OpsInputError && e.help === undefined) {
      e.help = cmd === 'events' || cmd === 'slot' ? [cmd, args[0]].filter(Boolean).join(' ') : cmd;
    }
    throw e;
  }
}
