import { ErrorCode, RelayError } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import { currentRole } from '../replication/preflight.ts';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { dropSlotOfThisDatabase } from '../store/slots.ts';
import { sqlName } from '../store/sql-ident.ts';
import { readSlot } from '../sweeper/slot-watch.ts';
import { OpsInputError, OpsNotFoundError } from './input-error.ts';
import { audit, confirm, type OpsContext } from './operator.ts';

/**
 * `outbox-relay slot drop`. Cases:
 *  - missing → input error (exit 64), nothing changes;
 *  - a slot of that name on another database (names are cluster-wide) → SLOT_OTHER_DATABASE
 *    (exit 78) naming both databases; it is never dropped from here;
 *  - the role lacks REPLICATION (pg_drop_replication_slot needs it) → INSUFFICIENT_PRIVILEGE (exit 78);
 *  - active (a relay streams from it) → refused (exit 69): stop the relay first;
 *  - inactive → dropped after --yes or an interactive "y" (else exit 64, nothing changes).
 * A dropped slot loses its position: the next `run` creates a new one that sees only later
 * commits; replay the gap with `outbox-relay replay --since …`.
 */
export function parseSlotArgs(args: string[]): void {
  const [sub, ...rest] = args;
  if (sub !== 'drop') {
    throw new OpsInputError(
      `${sub === undefined ? 'missing' : `unknown slot subcommand ${JSON.stringify(sub)};`} use: slot drop`,
    );
  }
  if (rest.length)
    throw new OpsInputError(`slot drop takes no arguments (the slot is --slot), got ${rest.join(' ')}`);
}

/** `slot drop`, its command line checked by parseSlotArgs (before connecting). */
export async function slotCommand(ctx: OpsContext): Promise<number> {
  const slot = ctx.config.slot;
  await requireReplication(ctx);
  const row = await readSlot(ctx.db, slot);
  if (!row) throw new OpsNotFoundError(`slot ${slot} does not exist (nothing changed)`);
  if (row.active) {
    process.stderr.write(
      `outbox-relay: slot ${slot} is active (pid ${row.activePid}): stop the relay that streams from it first; nothing changed\n`,
    );
    return EXIT.UNAVAILABLE;
  }
  const ok = await confirm(
    `Drop slot ${slot} (confirmed ${row.confirmedFlushLsn})? Events committed while no slot exists are not relayed.`,
    ctx.config.yes,
  );
  if (!ok) {
    process.stderr.write(
      'outbox-relay: not confirmed (pass --yes, or answer y on a terminal); nothing changed\n',
    );
    return EXIT.USAGE;
  }
  try {
    // The database is checked again in the statement itself: the name could have been dropped
    // and taken by another database since readSlot.
    if (!(await dropSlotOfThisDatabase(ctx.db, slot))) {
      process.stderr.write(
        `outbox-relay: slot ${slot} is no longer a slot of this database; nothing changed\n`,
      );
      return EXIT.UNAVAILABLE;
    }
  } catch (e) {
    // object_in_use: a relay took the slot between the check and the drop.
    if (sqlStateOf(e) === SqlState.OBJECT_IN_USE) {
      process.stderr.write(`outbox-relay: slot ${slot} became active; nothing changed\n`);
      return EXIT.UNAVAILABLE;
    }
    throw e;
  }
  await audit(ctx, 'slot drop', { slot, confirmedFlushLsn: row.confirmedFlushLsn }, 1);
  ctx.out(
    ctx.config.json
      ? JSON.stringify({ dropped: slot, confirmedFlushLsn: row.confirmedFlushLsn })
      : `slot ${slot} dropped (was at ${row.confirmedFlushLsn})`,
  );
  return EXIT.OK;
}

async function requireReplication(ctx: OpsContext): Promise<void> {
  const role = await currentRole(ctx.db);
  if (!role.replication) {
    throw new RelayError(
      ErrorCode.INSUFFICIENT_PRIVILEGE,
      `role ${role.name} cannot drop replication slots (pg_drop_replication_slot needs REPLICATION or superuser); nothing changed`,
      { fix: `ALTER ROLE ${sqlName(role.name)} WITH REPLICATION; -- or run \`slot drop\` as a superuser` },
    );
  }
}
