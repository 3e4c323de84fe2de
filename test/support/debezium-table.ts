/**
 * Debezium's own outbox table (its documented default columns) with the relay's side tables
 * (`migrate --compat debezium`), and the preset's flags with String converters: the set-up of the
 * tests of the preset's failure lifecycle.
 */
import { DEBEZIUM_TABLE } from '../../src/compat/debezium/facts.ts';
import { migrate } from '../../src/store/migrate.ts';
import type { KafkaHarness } from './kafka.ts';
import type { TestDatabase } from './postgres.ts';
import { slotOf } from './relay.ts';

export async function createDebeziumOutbox(db: TestDatabase): Promise<void> {
  await db.query(
    `CREATE TABLE public.outbox (
       id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
       aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
  );
  const client = await db.pool.connect();
  try {
    await migrate(client, {
      schema: 'public',
      table: 'outbox',
      publication: 'outbox_pub',
      slot: slotOf(db),
      applicationTable: DEBEZIUM_TABLE,
    });
  } finally {
    client.release();
  }
}

/** `--compat debezium` with String key and value converters, routed into the harness's namespace. */
export function debeziumStringArgs(kafka: KafkaHarness): string[] {
  const props = [
    `route.topic.replacement=${kafka.ns}outbox.event.$1`,
    'value.converter=org.apache.kafka.connect.storage.StringConverter',
    'key.converter=org.apache.kafka.connect.storage.StringConverter',
  ];
  return ['--compat', 'debezium', ...props.flatMap((p) => ['--debezium', p])];
}

/**
 * Debezium's documented usage: one transaction inserts the events and deletes them again (the
 * table stays empty; the events exist only in the WAL). Payload: {"id": <id>}.
 */
export async function insertThenDelete(
  db: TestDatabase,
  rows: [id: string, type: string, key: string][],
): Promise<void> {
  const tx = await db.pool.connect();
  try {
    await tx.query('BEGIN');
    for (const [id, type, key] of rows)
      await tx.query(
        `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'Created', $4)`,
        [id, type, key, JSON.stringify({ id })],
      );
    await tx.query('DELETE FROM outbox');
    await tx.query('COMMIT');
  } finally {
    tx.release();
  }
}
