-- What the active relay of each replication slot is doing, so `outbox-relay status` can show it
-- from any machine with database access (docs/operator-cli.md). One row per slot, written by the
-- relay that holds the slot's leader lock on every state change and at most every few seconds
-- (never per event); heartbeat_at is the database's clock at the last write.
CREATE TABLE {{schema}}.{{table}}_relay_state (
  slot_name        text        PRIMARY KEY,
  -- active, standby, broker-outage, database-outage, poison-position, starting, stopping, stopped
  state            text        NOT NULL,
  detail           text,
  -- pid@hostname of the writing relay
  holder           text        NOT NULL,
  since            timestamptz NOT NULL,
  last_progress_at timestamptz,
  confirmed_lsn    pg_lsn,
  last_error       text,
  last_error_at    timestamptz,
  poison_lsn       pg_lsn,
  heartbeat_at     timestamptz NOT NULL DEFAULT now()
);
