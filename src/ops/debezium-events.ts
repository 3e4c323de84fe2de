import { EXIT } from '../exit-codes.ts';
import { listSideRows, resendSideRows } from '../lifecycle/debezium-side-table.ts';
import { debeziumRouting } from '../route/debezium/event-router-options.ts';
import { qualified } from '../store/sql-ident.ts';
import type { EventsInput } from './events-command.ts';
import { formatTable, truncate } from './format.ts';
import { OpsInputError } from './input-error.ts';
import { audit, type OpsContext } from './operator.ts';

/**
 * `events list|resend` with --compat debezium: the events of a Debezium outbox that could not be
 * published live in the side table `<table>_relay_failed` (lifecycle/debezium-side-table.ts),
 * named by the insert's WAL position (the event id of this mode, shown by `events list`).
 */
export async function debeziumEventsCommand(ctx: OpsContext, input: EventsInput): Promise<number> {
  const c = ctx.config;
  const table = qualified(c.schema, `${c.table}_relay_failed`);
  switch (input.sub) {
    case 'list': {
      const rows = await listSideRows(
        ctx.db,
        table,
        c.slot,
        c.status ?? ['failed', 'dead', 'parked'],
        c.limit,
      );
      if (c.json) {
        ctx.out(JSON.stringify({ events: rows }));
        return EXIT.OK;
      }
      ctx.out(
        formatTable(
          ['id (WAL position)', 'status', 'attempts', 'event id', 'last error'],
          rows.map((r) => [
            r.walPosition,
            r.status,
            String(r.attempts),
            String(r.columns[idColumn(c.debezium)] ?? ''),
            truncate(r.lastError ?? '', 80),
          ]),
        ),
      );
      return EXIT.OK;
    }
    case 'resend': {
      if (input.filter)
        throw new OpsInputError(
          'events resend --filter is not available with --compat debezium: name the ids',
        );
      const n = await resendSideRows(ctx.db, table, c.slot, input.ids, c.resetAttempts);
      await audit(ctx, 'resend', { ids: input.ids, resetAttempts: c.resetAttempts }, n);
      ctx.out(c.json ? JSON.stringify({ action: 'resend', count: n }) : `${n} event(s) due again now`);
      return EXIT.OK;
    }
    default:
      throw new OpsInputError(`events ${input.sub} is not available with --compat debezium (list, resend)`);
  }
}

/** The event id column (table.field.event.id), whatever else the properties say. */
function idColumn(props: Record<string, string>): string {
  try {
    return debeziumRouting(props).fieldEventId;
  } catch {
    return 'id';
  }
}
