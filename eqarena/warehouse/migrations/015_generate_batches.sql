-- eqarena warehouse, migration 015: OpenAI Batch API jobs of `eqarena generate --batch`, so a run can be
-- killed at any point and resumed without paying for a batch twice (as judge_batches, migration 002).
--
-- A job goes prepared (prompts recorded, nothing sent) -> uploaded (input file id known) ->
-- submitted (batch id known) -> imported (answers in responses) | failed | expired | cancelled.
-- While a job is prepared, uploaded or submitted its prompts count as pending: the generate plan does
-- not ask for them again.

CREATE TABLE IF NOT EXISTS generate_batches (
    job_id          VARCHAR PRIMARY KEY,   -- eqarena's id of the job (also the upload's file name)
    dataset         VARCHAR NOT NULL,
    model_id        VARCHAR NOT NULL,      -- the model id the answers are stored under
    generator       VARCHAR NOT NULL,      -- provider:model that answers (no URL), as responses.generator
    generation      JSON NOT NULL,         -- settings sent, as responses.generation
    status          VARCHAR NOT NULL CHECK (status IN
                        ('prepared', 'uploaded', 'submitted', 'imported', 'failed', 'expired', 'cancelled')),
    requests        INTEGER NOT NULL,
    input_file_id   VARCHAR,
    batch_id        VARCHAR,               -- the provider's batch id
    output_file_id  VARCHAR,
    error_file_id   VARCHAR,
    provider_status VARCHAR,               -- last status the provider reported
    message         VARCHAR,
    run_id          VARCHAR,               -- the generate run that prepared it
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    updated_at      TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- One line of a job's JSONL: the prompt it asks the model to answer.
CREATE TABLE IF NOT EXISTS generate_batch_requests (
    job_id     VARCHAR NOT NULL,
    custom_id  VARCHAR NOT NULL,
    prompt_id  VARCHAR NOT NULL,
    PRIMARY KEY (job_id, custom_id)
);
