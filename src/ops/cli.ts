import pg from 'pg';
import { EXIT } from '../cli/exit-codes.ts';
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
 * beside a running relay. Bad input exits 64 and changes nothing.
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
    if (!(e instanceof OpsInputError)) throw e;
    process.stderr.write(`outbox-relay ${cmd}: ${e.message}\n`);
    return EXIT.USAGE;
  } finally {
    await client.end();
  }
}
