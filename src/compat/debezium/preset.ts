import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Config } from '../../config/load.ts';
import type { OutboxEvent } from '../../route/event.ts';
import { RouteError } from '../../route/router.ts';
import type { PresetSession, RelayPreset, StreamPreset } from '../preset.ts';
import { readCutover } from './cutover.ts';
import { columnsModeOf, debeziumRouting } from './event-router-options.ts';
import { DebeziumResume } from './resume.ts';
import { type DebeziumRoute, routeDebezium } from './route.ts';
import { DebeziumSideStore } from './side-store.ts';
import { SideTableRows } from './side-table-rows.ts';
import { tableColumns } from './table-columns.ts';

/**
 * The Debezium preset (--compat debezium): the application's table is Debezium's and is only
 * read. Rows are read as every column's text, as Debezium reads them, and routed as its
 * EventRouter routes them; an event that cannot be published goes to the side table
 * `<table>_relay_failed` (side-store.ts), which the sweeper works over (side-table-rows.ts). The
 * first streams after a cutover skip what Debezium had published (resume.ts).
 */
export function debeziumPreset(c: Config, pool: pg.Pool): RelayPreset {
  const routing = debeziumRouting(c.debezium);
  const store = new DebeziumSideStore(pool, c.schema, c.table, c.slot);
  const stream: StreamPreset = {
    columns: columnsModeOf(routing),
    open: async (db): Promise<PresetSession> => {
      // The table's columns (types, nullability: a schema's `optional`) as they are now.
      const route: DebeziumRoute = {
        routing,
        table: { schema: c.schema, table: c.table },
        columns: await tableColumns(db, c.schema, c.table),
        state: { runId: randomUUID() },
      };
      const cutover = await readCutover(db, c.schema, c.table, c.slot);
      const resume = cutover ? new DebeziumResume<OutboxEvent>(cutover.lsnProc, cutover.lsnCommit) : null;
      return {
        route: (event) => {
          try {
            return routeDebezium(event, route);
          } catch (e) {
            throw new RouteError(`Debezium preset: ${(e as Error).message}`, 'ROW_INVALID');
          }
        },
        ...(resume && {
          gate: resume,
          end: (log) =>
            log.info(
              { skipped: resume.skipped },
              'cutover from Debezium: events skipped as Debezium had published them',
            ),
        }),
        queued: (event) => store.remember(event),
      };
    },
  };
  return { store, sweepStore: new SideTableRows(store, c.slot, routing, c), progressRecord: false, stream };
}
