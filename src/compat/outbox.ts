import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { outboxEvents } from '../lifecycle/operator-events.ts';
import { OutboxStore } from '../lifecycle/outbox-store.ts';
import { routeConfigOf, topicFor } from '../route/router.ts';
import { OutboxRows } from '../sweeper/outbox-rows.ts';
import { type OperatorPreset, type OperatorTarget, OUTBOX_STREAM, type RelayPreset } from './preset.ts';

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

/** The outbox table as operators see it: its rows, routed by the topic template. */
export function outboxOperator(t: OperatorTarget): OperatorPreset {
  return {
    events: outboxEvents(t.schema, t.table),
    topicOf: (aggregateType, eventType) => topicFor({ aggregateType, eventType }, t),
    sideTable: false,
    cliFlags: '',
    noReplay: null,
  };
}
