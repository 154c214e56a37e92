-- eqarena warehouse, migration 007: bootstrap confidence of every equilibrium method's model ratings
-- (`eqarena rate --bootstrap N`, eqarena/solvers/bootstrap/confidence.py). One row per run, method, resampling scheme and
-- model (and rank): the rows of a rate run are written in its one transaction.
--
-- scheme: 'prompts' (the prompts drawn with replacement) or 'judgments' (each cell's judge samples
-- drawn with replacement within each order, position-balanced mean kept).
-- rating: the full-data rating (paper eq. 1, = ratings.rating); lo / hi: the percentile interval at
-- `confidence` of the replicates' ratings; p_top1 / p_top3: P(rank <= k) with tied models sharing
-- their ranks evenly; max_exploitability: the largest exploitability of a replicate's equilibrium.

CREATE TABLE IF NOT EXISTS rating_intervals (
    run_id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    scheme VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    rating DOUBLE NOT NULL,
    lo DOUBLE NOT NULL,
    hi DOUBLE NOT NULL,
    median DOUBLE NOT NULL,
    confidence DOUBLE NOT NULL,
    p_top1 DOUBLE NOT NULL,
    p_top3 DOUBLE NOT NULL,
    replicates INTEGER NOT NULL,
    max_exploitability DOUBLE,
    PRIMARY KEY (run_id, method, scheme, model_id)
);

-- probability: the share of replicates in which the model has this rank (1 = best); sums to 1 over
-- ranks for a model and over models for a rank.
CREATE TABLE IF NOT EXISTS rank_probabilities (
    run_id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    scheme VARCHAR NOT NULL,
    model_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    probability DOUBLE NOT NULL,
    PRIMARY KEY (run_id, method, scheme, model_id, rank)
);
