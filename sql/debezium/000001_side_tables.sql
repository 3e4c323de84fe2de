-- The Debezium preset (--compat debezium, docs/debezium-migration.md): the application's Debezium
-- outbox table is not changed. The relay keeps its own state beside it: the slot's state row and
-- progress row (as sql/000002 and sql/000003 do for the relay's own table), and the events that
-- could not be published, in a side table — with insert-then-delete the event exists only in the
-- WAL, so its failure cannot be written on a row. Idempotent: applied by every
-- `outbox-relay migrate --compat debezium`.
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}}_relay_state (
  slot_name        text        PRIMARY KEY,
  state            text        NOT NULL,
  detail           text,
  holder           text        NOT NULL,
  since            timestamptz NOT NULL,
  last_progress_at timestamptz,
  confirmed_lsn    pg_lsn,
  last_error       text,
  last_error_at    timestamptz,
  poison_lsn       pg_lsn,
  heartbeat_at     timestamptz NOT NULL DEFAULT now()
);
-- Not used for progress by the preset (its progress is the slot's confirmed position alone), but
-- read by the relay's start-up like any slot's.
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}}_relay_progress (
  slot_name       text           PRIMARY KEY,
  published       int8multirange NOT NULL DEFAULT '{}',
  horizon_id      bigint,
  horizon_at      timestamptz,
  horizon_xmax    xid8,
  updated_at      timestamptz    NOT NULL DEFAULT now(),
  recovery_since  timestamptz,
  recovery_reason text
);
-- One row per event that failed for good: the Debezium row as the WAL carried it (each column's
-- text), keyed by the slot and the insert's WAL position (the same on every replay).
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}}_relay_failed (
  slot_name       text        NOT NULL,
  wal_position    bigint      NOT NULL,
  columns         jsonb       NOT NULL,
  status          text        NOT NULL DEFAULT 'failed',
  attempts        integer     NOT NULL DEFAULT 1,
  next_attempt_at timestamptz,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  published_at    timestamptz,
  PRIMARY KEY (slot_name, wal_position)
);
CREATE INDEX IF NOT EXISTS {{table}}_relay_failed_due
  ON {{schema}}.{{table}}_relay_failed (next_attempt_at) WHERE status = 'failed';
