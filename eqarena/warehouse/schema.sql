-- eqarena warehouse, schema version 1: the core tables.
-- Later changes are numbered files in eqarena/warehouse/migrations/ (002_*.sql, ...), applied in order on
-- connect and recorded in schema_version. Table and column names are a contract for report consumers.

CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER PRIMARY KEY,
    name        VARCHAR NOT NULL,
    applied_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- One row per prompt of a dataset (vicuna80 question, arena-hard uid / question_id).
CREATE TABLE IF NOT EXISTS prompts (
    dataset     VARCHAR NOT NULL,
    prompt_id   VARCHAR NOT NULL,
    category    VARCHAR,
    cluster     VARCHAR,
    text        VARCHAR NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (dataset, prompt_id)
);

-- One row per model, shared by all datasets. family = name prefix, for grouping (paper Section 4.3).
CREATE TABLE IF NOT EXISTS models (
    model_id    VARCHAR PRIMARY KEY,
    family      VARCHAR NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- One answer of a model to a prompt.
CREATE TABLE IF NOT EXISTS responses (
    dataset      VARCHAR NOT NULL,
    prompt_id    VARCHAR NOT NULL,
    model_id     VARCHAR NOT NULL,
    response_id  VARCHAR,                 -- the source's answer id, when it has one
    text         VARCHAR NOT NULL,
    text_sha256  VARCHAR NOT NULL,
    created_at   TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (dataset, prompt_id, model_id)
);

-- One row per judge call sample. model_a is the model shown as assistant A (first position).
-- score is from A's point of view: A>>B +1, A>B +0.5, A=B 0, B>A -0.5, B>>A -1
-- (three-class templates: +1 / 0 / -1). score is NULL unless status = 'ok'.
CREATE TABLE IF NOT EXISTS judgments (
    judge          VARCHAR NOT NULL,      -- e.g. 'openai:gpt-4o-mini', 'prd:gpt4'
    template_hash  VARCHAR NOT NULL,      -- content hash of the judge template
    dataset        VARCHAR NOT NULL,
    prompt_id      VARCHAR NOT NULL,
    model_a        VARCHAR NOT NULL,
    model_b        VARCHAR NOT NULL,
    sample_index   INTEGER NOT NULL,
    status         VARCHAR NOT NULL CHECK (status IN ('ok', 'unparsed', 'error')),
    verdict        VARCHAR,               -- the parsed label, e.g. 'A>B'
    score          DOUBLE CHECK (score BETWEEN -1 AND 1),
    raw_text       VARCHAR,               -- the judge's full output (never the request or a key)
    error          VARCHAR,               -- what went wrong, for status 'error'
    tokens_in      INTEGER,
    tokens_out     INTEGER,
    latency_s      DOUBLE,
    run_id         VARCHAR,
    created_at     TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (judge, template_hash, dataset, prompt_id, model_a, model_b, sample_index),
    CHECK (model_a <> model_b),
    CHECK ((status = 'ok') = (score IS NOT NULL))
);

-- One row per pipeline run (ingest, judge, rate, report, run).
CREATE TABLE IF NOT EXISTS runs (
    run_id            VARCHAR PRIMARY KEY,
    kind              VARCHAR NOT NULL,
    status            VARCHAR NOT NULL DEFAULT 'running',   -- running | ok | failed
    started_at        TIMESTAMP NOT NULL DEFAULT current_timestamp,
    finished_at       TIMESTAMP,
    parameters        JSON,               -- flags / flow parameters (never secrets)
    versions          JSON,               -- package versions
    data_fingerprint  VARCHAR,            -- hash of the data the run read
    timings           JSON,               -- seconds per stage
    message           VARCHAR
);
