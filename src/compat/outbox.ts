import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { OutboxStore } from '../lifecycle/outbox-store.ts';
import { routeConfigOf } from '../route/router.ts';
import { OutboxRows } from '../sweeper/outbox-rows.ts';
import { OUTBOX_STREAM, type RelayPreset } from './preset.ts';

/** The default preset: the relay's own outbox table holds every outcome and the progress record. */
export function outboxPreset(c: Config, pool: pg.Pool): RelayPreset {
  const store = new OutboxStore(pool, c.schema, c.table);
  return {
    store,
    sweepStore: new OutboxRows(store, routeConfigOf(c)),
    progressRecord: true,
    stream: OUTBOX_STREAM,
  };
}
