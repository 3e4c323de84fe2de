-- Progress, not per-row marks (issue 11): which outbox ids each slot's relay has settled, as one
-- int8multirange per slot, written once per batch (one UPDATE whose size follows the batch's id
-- runs, not its event count) before the slot position is confirmed past them. Settled = the
-- broker acknowledged the event, or its failure is recorded on the row (failed, parked,
-- discarded — written before the record covers the id; the row's own status wins).
--
-- The outbox row's status column keeps 'pending' for events the stream published: the truthful
-- status is {{table}}_with_status below (docs/outbox-table.md). Existing rows are not rewritten:
-- rows already marked 'published' stay 'published'.
CREATE TABLE {{schema}}.{{table}}_relay_progress (
  slot_name     text           PRIMARY KEY,
  published     int8multirange NOT NULL DEFAULT '{}',
  -- The compaction horizon (sweeper): max(id) seen at horizon_at, then the snapshot xmax taken at
  -- a later round. Once every transaction below horizon_xmax has ended, an id <= horizon_id with
  -- no visible row can never appear (rolled back or deleted): gaps of such ids are filled.
  horizon_id    bigint,
  horizon_at    timestamptz,
  horizon_xmax  xid8,
  updated_at    timestamptz    NOT NULL DEFAULT now()
);

-- Each row with its truthful status: the row's own status when the lifecycle moved it (failed,
-- dead, parked, discarded, or published by a retry), else 'published' when a progress record
-- covers its id, else 'pending'. row_status is the column as stored.
CREATE VIEW {{schema}}.{{table}}_with_status AS
SELECT o.id, o.event_id, o.aggregate_type, o.aggregate_id, o.event_type, o.payload, o.content_type,
       o.headers, o.traceparent, o.created_at,
       CASE WHEN o.status = 'pending'
             AND (SELECT coalesce(range_agg(r), '{}'::int8multirange)
                    FROM {{schema}}.{{table}}_relay_progress AS p, unnest(p.published) AS r) @> o.id
            THEN 'published' ELSE o.status END AS status,
       o.attempts, o.next_attempt_at, o.last_error, o.published_at, o.status AS row_status
  FROM {{schema}}.{{table}} AS o;
