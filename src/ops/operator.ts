import { userInfo } from 'node:os';
import { createInterface } from 'node:readline/promises';
import type pg from 'pg';
import type { Config } from '../config/load.ts';
import type { OperatorEvents } from '../lifecycle/operator-events.ts';
import type { Logger } from '../observability/logger.ts';
import { qualified } from '../store/sql-ident.ts';
import { operatorEventsOf } from './events.ts';

/** What every operator command gets: its config, one connection, output and the audit log. */
export interface OpsContext {
  config: Config;
  db: pg.ClientBase;
  /** The outbox table, quoted. */
  table: string;
  /** The events the commands work on: the outbox table's, or the Debezium preset's side table's. */
  events: OperatorEvents;
  log: Logger;
  out: (text: string) => void;
}

export function opsContext(config: Config, db: pg.ClientBase, log: Logger): OpsContext {
  return {
    config,
    db,
    table: qualified(config.schema, config.table),
    events: operatorEventsOf(config),
    log,
    out: (text) => process.stdout.write(`${text}\n`),
  };
}

/** Destructive commands are logged with who (OS user and database role), what and how many. */
export async function audit(ctx: OpsContext, action: string, what: Record<string, unknown>, rows: number) {
  const role = await ctx.db.query<{ u: string }>('SELECT current_user AS u');
  let osUser = 'unknown';
  try {
    osUser = userInfo().username;
  } catch {
    // No passwd entry (containers): the database role still names who did it.
  }
  ctx.log.warn(
    { audit: true, action, osUser, dbRole: role.rows[0]?.u, table: ctx.events.table, ...what, rows },
    `operator ${action}: ${rows} row(s)`,
  );
}

/**
 * --yes, or an interactive "y" on a terminal. Without a terminal and without --yes the
 * answer is no: a script must say --yes explicitly.
 */
export async function confirm(question: string, yes: boolean): Promise<boolean> {
  if (yes) return true;
  if (!process.stdin.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}
