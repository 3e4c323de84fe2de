-- Where Debezium stopped, for the relay's first streams after a cutover (`outbox-relay migrate
-- --compat debezium --debezium-offsets <file>`, docs/debezium-migration.md#cutover): read from
-- the connector's Kafka Connect offsets; the stream skips what Debezium processed
-- (src/replication/debezium-resume.ts). One row per slot.
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}}_relay_cutover (
  slot_name   text        PRIMARY KEY,
  lsn_proc    pg_lsn      NOT NULL,
  lsn_commit  pg_lsn      NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now()
);
