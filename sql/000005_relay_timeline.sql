-- The database timeline the slot's relay last started on (issue 36), as src/store/timeline.ts
-- keys it ('00000002:<system identifier>'). A relay that starts on another timeline — a standby
-- promoted while it was down — knows that outcomes it recorded on the old primary may not have
-- reached the new one, and publishes from the table every row the new primary's record does not
-- cover, even when the slot itself survived the promotion (a synced failover slot, PostgreSQL 17+).
-- Set here to the server's current timeline, so a promotion before the relay's first start after
-- this migration is seen too.
ALTER TABLE {{schema}}.{{table}}_relay_progress ADD COLUMN timeline text;
UPDATE {{schema}}.{{table}}_relay_progress
   SET timeline = (SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || ':' || system_identifier::text
                     FROM pg_control_system());
