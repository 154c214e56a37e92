-- eqarena warehouse, migration 014: per-category leaderboards (`rate --by category|cluster`) and the
-- category of a run restricted to one (`rate --category X`).
--
-- A rate run with --by also rates each group of the dataset's prompts (a value of prompts.category or
-- prompts.cluster) on its own, by the run's methods and missing-cell policy: point ratings of the
-- models, written with the run in the same transaction. Every group gets a category_groups row, rated
-- or skipped with the reason; category_ratings holds the rated groups' model ratings.

CREATE TABLE IF NOT EXISTS category_groups (
    run_id         VARCHAR NOT NULL,   -- the rate run
    grouping       VARCHAR NOT NULL CHECK (grouping IN ('category', 'cluster')),
    category       VARCHAR NOT NULL,   -- the group: a category (or cluster) of the dataset's prompts
    prompts        INTEGER NOT NULL,   -- the group's prompts in the dataset
    prompts_rated  INTEGER NOT NULL,   -- prompts in the solved tensor (after the missing-cell policy)
    models_rated   INTEGER NOT NULL,   -- models in the solved tensor
    status         VARCHAR NOT NULL CHECK (status IN ('rated', 'skipped')),
    reason         VARCHAR,            -- skipped: why; rated: what the missing-cell policy did
    PRIMARY KEY (run_id, grouping, category)
);

-- One row per rated group, method and model. rating: the method's king rating on the group's prompts
-- alone (as ratings.rating); rank 1 is best within the group and method, ratings equal to 1e-6 share a
-- rank; mass: the equilibrium's king marginal (NULL for model-rating methods); exploitability: the
-- group's equilibrium's (NULL for model-rating methods). No bootstrap: no intervals per group.
CREATE TABLE IF NOT EXISTS category_ratings (
    run_id          VARCHAR NOT NULL,
    grouping        VARCHAR NOT NULL CHECK (grouping IN ('category', 'cluster')),
    category        VARCHAR NOT NULL,
    method          VARCHAR NOT NULL,
    model_id        VARCHAR NOT NULL,
    rating          DOUBLE NOT NULL,
    rank            INTEGER NOT NULL,
    mass            DOUBLE,
    prompts         INTEGER NOT NULL,   -- prompts rated (category_groups.prompts_rated)
    exploitability  DOUBLE,
    PRIMARY KEY (run_id, grouping, category, method, model_id)
);

-- Rate runs now show the category a run was restricted to (NULL: the whole dataset) and its --by.
CREATE OR REPLACE VIEW rate_runs AS
SELECT run_id,
       started_at,
       finished_at,
       parameters ->> 'dataset' AS dataset,
       parameters ->> 'judges'  AS judges,
       parameters ->> 'methods' AS methods,
       data_fingerprint,
       timings,
       parameters ->> 'category' AS category,
       parameters ->> 'by'       AS by_grouping
FROM runs
WHERE kind = 'rate' AND status = 'ok'
ORDER BY finished_at DESC, started_at DESC;

-- The per-group ratings of the newest rate run that has any (one row per group, method and model).
CREATE OR REPLACE VIEW latest_category_ratings AS
WITH latest AS (
    SELECT r.run_id, r.dataset FROM rate_runs r
    WHERE EXISTS (SELECT 1 FROM category_groups g WHERE g.run_id = r.run_id)
    ORDER BY r.finished_at DESC, r.started_at DESC, r.run_id DESC
    LIMIT 1)
SELECT c.run_id, l.dataset, c.grouping, c.category, c.prompts, c.method, c.model_id, m.family,
       c.rating, c.rank, c.mass, c.exploitability
FROM category_ratings c
JOIN latest l USING (run_id)
LEFT JOIN models m ON m.model_id = c.model_id
ORDER BY c.grouping, c.category, c.method, c.rank, c.model_id;
