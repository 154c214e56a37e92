-- eqarena warehouse, migration 012: simulated improvement paths (paper Section 2, Algorithm 1).
-- `eqarena simulate improvement-path` writes one simulation run (also a `runs` row of kind 'simulate'
-- with the same run_id) and all its steps in one transaction. Documented in eqarena/warehouse/VIEWS.md.

CREATE TABLE IF NOT EXISTS simulation_runs (
    run_id       VARCHAR PRIMARY KEY,
    kind         VARCHAR NOT NULL,   -- 'improvement-path'
    parameters   JSON NOT NULL,      -- sizes (K, P_0, M_0, M', P', iterations, max_rounds), methods, settings, trials, seed
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP
);

-- The state after each iteration of each trial (iteration 0 = the initial draw, no added vectors).
CREATE TABLE IF NOT EXISTS simulation_steps (
    run_id          VARCHAR NOT NULL,
    method          VARCHAR NOT NULL,   -- 'elo' (Bradley-Terry) or a method of the registry
    setting         VARCHAR NOT NULL CHECK (setting IN ('initial', 'additional')),
    trial           INTEGER NOT NULL,   -- drawn with seed + trial
    iteration       INTEGER NOT NULL,
    prompt_entropy  DOUBLE NOT NULL,    -- H(mean prompt), nats
    model_entropy   DOUBLE NOT NULL,    -- H(mean model / its sum), nats
    added_model     DOUBLE[],           -- (K,) skills of the model added at this iteration
    added_prompt    DOUBLE[],           -- (K,) the best-of-P' prompt added ('additional' only)
    prompt_marginal DOUBLE[],           -- the prompt player's equilibrium over the P_t prompts (NULL for elo)
    rounds          INTEGER NOT NULL,   -- improvement rounds the added model took
    top_ranked      BOOLEAN NOT NULL,   -- false: max_rounds was reached first
    PRIMARY KEY (run_id, method, setting, trial, iteration)
);
