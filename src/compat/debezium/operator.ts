import { qualified } from '../../store/sql-ident.ts';
import type { OperatorPreset, OperatorTarget } from '../preset.ts';
import { columnsModeOf, debeziumRouting } from './event-router-options.ts';
import { javaReplaceWhole } from './java-regex.ts';
import { debeziumSideEvents } from './side-events.ts';

/**
 * The Debezium preset as operators see it: the events are the side table `<table>_relay_failed`
 * of this slot (the application's Debezium table holds no outcome; with insert-then-delete it
 * holds no row at all), routed by route.topic.regex / route.topic.replacement.
 */
export function debeziumOperator(t: OperatorTarget): OperatorPreset {
  const r = debeziumRouting(t.debezium ?? {});
  return {
    events: debeziumSideEvents(qualified(t.schema, `${t.table}_relay_failed`), t.slot, columnsModeOf(r)),
    topicOf: (routedBy) => javaReplaceWhole(routedBy, r.topicRegex, r.topicReplacement),
    sideTable: true,
    cliFlags: ' --compat debezium',
    noReplay:
      'Replay is not available with --compat debezium (the relay never writes the Debezium table). The events that could not be published are under Events.',
  };
}
