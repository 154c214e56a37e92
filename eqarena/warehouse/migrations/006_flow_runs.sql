-- eqarena warehouse, migration 006: the Prefect flow run behind each eqarena run, so a row of `runs`
-- leads to the run's logs, artifacts and state in the Prefect UI (NULL for runs made before, or
-- outside a flow).

ALTER TABLE runs ADD COLUMN IF NOT EXISTS flow_run_id VARCHAR;
