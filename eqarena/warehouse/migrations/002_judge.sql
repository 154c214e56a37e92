-- eqarena warehouse, migration 002: OpenAI Batch API jobs of the judge, so `eqarena judge --batch`
-- can be killed at any point and resumed without paying for a batch twice.
--
-- A job goes prepared (requests recorded, nothing sent) -> uploaded (input file id known) ->
-- submitted (batch id known) -> imported (results in judgments) | failed | expired | cancelled.
-- While a job is prepared, uploaded or submitted its requests' sample indices are reserved: the judge
-- plan neither asks for them again nor reuses the indices.

CREATE TABLE IF NOT EXISTS judge_batches (
    job_id          VARCHAR PRIMARY KEY,   -- eqarena's id of the job (also the upload's file name)
    judge           VARCHAR NOT NULL,
    template_hash   VARCHAR NOT NULL,
    dataset         VARCHAR NOT NULL,
    status          VARCHAR NOT NULL CHECK (status IN
                        ('prepared', 'uploaded', 'submitted', 'imported', 'failed', 'expired', 'cancelled')),
    requests        INTEGER NOT NULL,
    samples         INTEGER NOT NULL,
    input_file_id   VARCHAR,
    batch_id        VARCHAR,               -- the provider's batch id
    output_file_id  VARCHAR,
    error_file_id   VARCHAR,
    provider_status VARCHAR,               -- last status the provider reported
    message         VARCHAR,
    run_id          VARCHAR,
    created_at      TIMESTAMP NOT NULL DEFAULT current_timestamp,
    updated_at      TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- One line of a job's JSONL: the ordered cell it judges and the sample indices its n samples fill.
CREATE TABLE IF NOT EXISTS judge_batch_requests (
    job_id        VARCHAR NOT NULL,
    custom_id     VARCHAR NOT NULL,
    prompt_id     VARCHAR NOT NULL,
    model_a       VARCHAR NOT NULL,
    model_b       VARCHAR NOT NULL,
    first_sample  INTEGER NOT NULL,        -- sample indices first_sample .. first_sample + n - 1
    n             INTEGER NOT NULL CHECK (n >= 1),
    PRIMARY KEY (job_id, custom_id)
);
