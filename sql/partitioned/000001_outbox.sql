-- The outbox table, partitioned by created_at (`migrate --partitioned`): the same columns and
-- indexes as sql/000001_outbox.sql, applied instead of it as version 1; the later migrations are
-- shared. docs/outbox-table.md#partitioning.
-- {{schema}} and {{table}} are replaced by quoted identifiers from the configuration.
--
-- A partitioned table's primary key must include the partition key: (id, created_at). id still
-- comes from the one identity sequence of the root (GENERATED ALWAYS: an insert cannot choose it),
-- so it stays unique across partitions, and everything the relay keys by id (the progress record's
-- id ranges, the operator commands' ids, replay's ceiling) keeps its meaning. A lookup by id alone
-- probes each partition's primary-key index (its first column is id).
-- The partitions themselves (one per interval, named {{table}}_pYYYYMMDD…) are created by migrate
-- and kept ahead of time by the relay (store/partitions.ts), not by this file.
CREATE TABLE {{schema}}.{{table}} (
  id              bigint GENERATED ALWAYS AS IDENTITY,
  -- The event's identity for consumers' deduplication. Not unique: a replay re-inserts it.
  event_id        uuid        NOT NULL DEFAULT gen_random_uuid(),
  aggregate_type  text        NOT NULL CONSTRAINT {{table}}_aggregate_type_not_empty CHECK (aggregate_type <> ''),
  aggregate_id    text        NOT NULL,
  event_type      text        NOT NULL,
  -- The message value as is; NULL is a tombstone.
  payload         bytea,
  content_type    text        NOT NULL DEFAULT 'application/json',
  -- String values become message headers.
  headers         jsonb       NOT NULL DEFAULT '{}' CONSTRAINT {{table}}_headers_object CHECK (jsonb_typeof(headers) = 'object'),
  traceparent     text,
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  status          text        NOT NULL DEFAULT 'pending'
    CONSTRAINT {{table}}_status_known CHECK (status IN ('pending', 'published', 'failed', 'dead', 'parked', 'discarded')),
  attempts        integer     NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  last_error      text,
  published_at    timestamptz,
  PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

CREATE INDEX {{table}}_event_id_idx ON {{schema}}.{{table}} (event_id);
-- Replay windows (retention drops whole partitions).
CREATE INDEX {{table}}_created_at_idx ON {{schema}}.{{table}} (created_at);
-- The sweeper's due rows and the operator's views of unhealthy rows stay small and hot.
CREATE INDEX {{table}}_unsettled_idx ON {{schema}}.{{table}} (status, next_attempt_at, id)
  WHERE status IN ('failed', 'dead', 'parked');
CREATE INDEX {{table}}_blocked_aggregate_idx ON {{schema}}.{{table}} (aggregate_type, aggregate_id, id)
  WHERE status IN ('failed', 'dead', 'parked');
