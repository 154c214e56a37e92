-- eqarena warehouse, migration 010: the process behind each run (pid and start time on host), so a run left
-- `running` by a process that was killed is recognised and marked `abandoned` (runs.status is then
-- running | ok | failed | abandoned). NULL for runs made before.

ALTER TABLE runs ADD COLUMN IF NOT EXISTS pid INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS process_started DOUBLE;  -- the process's start, epoch seconds
