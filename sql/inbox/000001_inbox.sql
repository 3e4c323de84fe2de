-- The consumer inbox (docs/sdk.md): one row per event a consumer has processed, inserted in the same
-- transaction as the handler's side effects, so a redelivered or replayed event is recognised and skipped.
-- Applied by createInbox().migrate(), not by `outbox-relay migrate` (it lives in the consumer's database).
-- {{schema}} and {{table}} are replaced by quoted identifiers. Idempotent: migrate() re-runs it.
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}} (
  -- The logical consumer (e.g. "billing"): several consumers of one event each process it once.
  consumer     text        NOT NULL,
  -- The event's event_id (the `id` message header), kept across replays.
  event_id     uuid        NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, event_id)
);

-- prune() deletes by age.
CREATE INDEX IF NOT EXISTS {{table}}_processed_at_idx ON {{schema}}.{{table}} (processed_at);
