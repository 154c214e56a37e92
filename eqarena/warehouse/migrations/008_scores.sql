-- eqarena warehouse, migration 008: per-prompt scores (`eqarena import scores`), stored as given.
-- One row per (judge, payoff rule, dataset, prompt, model): the score table's cell. The payoff of king a
-- over rebel b on prompt p is derived when a tensor is assembled, never stored pair by pair:
--   clip-diff: clip((s_a - s_b) / scale, -1, 1);   sign: sign(s_a - s_b)
-- template_hash names the rule and scale ('scores:clip-diff/scale=1'), as judgments' template_hash
-- names a judge template. Score tables imported before this migration stay in `judgments` as
-- pairwise rows, and are read from there as before.

CREATE TABLE IF NOT EXISTS scores (
    judge          VARCHAR NOT NULL,      -- e.g. 'scores:livebench'
    template_hash  VARCHAR NOT NULL,      -- the payoff rule and scale
    dataset        VARCHAR NOT NULL,
    prompt_id      VARCHAR NOT NULL,
    model_id       VARCHAR NOT NULL,
    score          DOUBLE NOT NULL,       -- the raw score, in the table's own units
    payoff         VARCHAR NOT NULL CHECK (payoff IN ('clip-diff', 'sign')),
    scale          DOUBLE NOT NULL CHECK (scale > 0),
    run_id         VARCHAR,
    created_at     TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (judge, template_hash, dataset, prompt_id, model_id)
);
