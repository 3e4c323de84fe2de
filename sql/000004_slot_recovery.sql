-- Lost-slot recovery (issue 11): set when the relay decides to publish a slot's gap from the table
-- (before it creates the new slot), cleared once that table pass is done. A relay that finds it set
-- runs the pass again (a crash during a recovery must not leave the gap behind), whatever the slot.
ALTER TABLE {{schema}}.{{table}}_relay_progress
  ADD COLUMN recovery_since  timestamptz,
  ADD COLUMN recovery_reason text;
