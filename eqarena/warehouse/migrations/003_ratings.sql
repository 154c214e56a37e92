-- eqarena warehouse, migration 003: what a rating run writes, and the views report consumers read.
-- Every table is keyed by run_id (runs.run_id, kind 'rate'); a run's rows are written in one
-- transaction, so a run is either all there or absent. Documented for consumers in eqarena/warehouse/VIEWS.md.

-- The payoff tensor a run solved: u_king(p, i, j) for every prompt and ordered model pair i != j that
-- the run kept (paper Section 3.1; position-balanced, see eqarena/warehouse/tensor.py). Antisymmetric.
CREATE TABLE IF NOT EXISTS payoffs (
    run_id      VARCHAR NOT NULL,
    prompt_id   VARCHAR NOT NULL,
    king        VARCHAR NOT NULL,   -- model i
    rebel       VARCHAR NOT NULL,   -- model j
    u_king      DOUBLE NOT NULL,    -- mean judged preference of i over j on the prompt, in [-1, 1]
    samples     INTEGER NOT NULL,   -- ok judgments behind the cell (both orders, all judges)
    PRIMARY KEY (run_id, prompt_id, king, rebel)
);

-- Ratings of every action of every player, one row per (run, method, player, action).
-- method: a name of the rating-method registry (eqarena/methods.py; `eqarena methods` lists
-- them), e.g. bt (Bradley-Terry, Elo scale), ne, cce (affinity-entropy selected), ne-shannon,
-- cce-shannon (uniform target). For equilibria, rating = deviation gain u_i(a, x_-i) - u_i(x)
-- (paper eq. 1) and mass = the action's equilibrium marginal probability; for model-rating methods
-- such as bt, mass is NULL and ci_lo / ci_hi their own bootstrap confidence interval. rank 1 is
-- best; ratings equal to 1e-6 share a rank.
CREATE TABLE IF NOT EXISTS ratings (
    run_id   VARCHAR NOT NULL,
    method   VARCHAR NOT NULL,
    player   VARCHAR NOT NULL CHECK (player IN ('prompt', 'king', 'rebel')),
    action   VARCHAR NOT NULL,   -- prompt_id for the prompt player, model_id otherwise
    rating   DOUBLE NOT NULL,
    rank     INTEGER NOT NULL,
    mass     DOUBLE,
    ci_lo    DOUBLE,
    ci_hi    DOUBLE,
    PRIMARY KEY (run_id, method, player, action)
);

-- One row per solved equilibrium: how exact it is and what the solver did.
CREATE TABLE IF NOT EXISTS equilibria (
    run_id              VARCHAR NOT NULL,
    method              VARCHAR NOT NULL,   -- an equilibrium method of the registry (eqarena/methods.py)
    solution_concept    VARCHAR NOT NULL,   -- 'nash' | 'cce'
    target              VARCHAR NOT NULL,   -- 'affinity' | 'uniform'
    solver              VARCHAR,            -- e.g. 'branch', 'dual'
    exploitability      DOUBLE NOT NULL,    -- sum over players of the max deviation gain (CCE: max gap)
    steps               INTEGER,
    final_temperature   DOUBLE,
    seconds             DOUBLE,
    joint_cells         INTEGER,            -- CCE: cells stored in equilibrium_joint
    joint_mass_omitted  DOUBLE,             -- CCE: total mass of the cells below the storage threshold
    diagnostics         JSON,
    PRIMARY KEY (run_id, method)
);

-- Equilibrium marginals: the probability of every action of every player.
CREATE TABLE IF NOT EXISTS equilibrium_marginals (
    run_id   VARCHAR NOT NULL,
    method   VARCHAR NOT NULL,
    player   VARCHAR NOT NULL CHECK (player IN ('prompt', 'king', 'rebel')),
    action   VARCHAR NOT NULL,
    mass     DOUBLE NOT NULL,
    PRIMARY KEY (run_id, method, player, action)
);

-- The CCE joint distribution over (prompt, king, rebel), its non-negligible cells only
-- (mass >= 1e-7; the omitted total is equilibria.joint_mass_omitted).
CREATE TABLE IF NOT EXISTS equilibrium_joint (
    run_id     VARCHAR NOT NULL,
    method     VARCHAR NOT NULL,
    prompt_id  VARCHAR NOT NULL,
    king       VARCHAR NOT NULL,
    rebel      VARCHAR NOT NULL,
    mass       DOUBLE NOT NULL,
    PRIMARY KEY (run_id, method, prompt_id, king, rebel)
);

-- Marginal rating contributions (paper Section 4.3): delta(king model, rebel model, x); summed over
-- rebels they give the king model's rating under the method's equilibrium.
CREATE TABLE IF NOT EXISTS contributions (
    run_id   VARCHAR NOT NULL,
    method   VARCHAR NOT NULL,
    king     VARCHAR NOT NULL,
    rebel    VARCHAR NOT NULL,
    delta    DOUBLE NOT NULL,
    PRIMARY KEY (run_id, method, king, rebel)
);

-- Data coverage before any drop policy: for every ordered model pair, on how many prompts of the
-- dataset both orders have at least one ok judgment.
CREATE TABLE IF NOT EXISTS coverage (
    run_id           VARCHAR NOT NULL,
    model_a          VARCHAR NOT NULL,
    model_b          VARCHAR NOT NULL,
    prompts_total    INTEGER NOT NULL,
    prompts_covered  INTEGER NOT NULL,
    PRIMARY KEY (run_id, model_a, model_b)
);

-- Judgment rows the run read, by judge and status (ok | unparsed | error).
CREATE TABLE IF NOT EXISTS run_inputs (
    run_id     VARCHAR NOT NULL,
    judge      VARCHAR NOT NULL,
    status     VARCHAR NOT NULL,
    judgments  BIGINT NOT NULL,
    PRIMARY KEY (run_id, judge, status)
);

-- Prompts or models removed by the missing-data policy (--missing drop-prompts | drop-models).
CREATE TABLE IF NOT EXISTS dropped (
    run_id         VARCHAR NOT NULL,
    player         VARCHAR NOT NULL CHECK (player IN ('prompt', 'model')),
    action         VARCHAR NOT NULL,
    missing_cells  INTEGER NOT NULL,   -- uncovered (prompt, ordered pair) cells it was part of
    PRIMARY KEY (run_id, player, action)
);

-- ---------------------------------------------------------------- views for report consumers

-- Rate runs that finished, newest first; dataset and judges come from the run's parameters.
CREATE OR REPLACE VIEW rate_runs AS
SELECT run_id,
       started_at,
       finished_at,
       parameters ->> 'dataset' AS dataset,
       parameters ->> 'judges'  AS judges,
       parameters ->> 'methods' AS methods,
       data_fingerprint,
       timings
FROM runs
WHERE kind = 'rate' AND status = 'ok'
ORDER BY finished_at DESC, started_at DESC;

-- The newest finished rate run (one row, or none before the first run).
CREATE OR REPLACE VIEW latest_rate_run AS
SELECT * FROM rate_runs
ORDER BY finished_at DESC, started_at DESC, run_id DESC
LIMIT 1;

-- One row per model and method of the latest rate run: the king player's rating (models are rated
-- as kings, docs/game.md), its rank, equilibrium mass and (bt) confidence interval.
CREATE OR REPLACE VIEW latest_model_ratings AS
SELECT r.run_id, l.dataset, r.method, r.action AS model_id, m.family,
       r.rating, r.rank, r.mass, r.ci_lo, r.ci_hi
FROM ratings r
JOIN latest_rate_run l USING (run_id)
LEFT JOIN models m ON m.model_id = r.action
WHERE r.player = 'king'
ORDER BY r.method, r.rank, r.action;

-- One row per prompt and equilibrium method of the latest rate run.
CREATE OR REPLACE VIEW latest_prompt_ratings AS
SELECT r.run_id, l.dataset, r.method, r.action AS prompt_id, r.rating, r.rank, r.mass
FROM ratings r
JOIN latest_rate_run l USING (run_id)
WHERE r.player = 'prompt'
ORDER BY r.method, r.rank, r.action;

-- Mean payoff of each model as king over all kept prompts and opponents, per run.
CREATE OR REPLACE VIEW model_mean_payoffs AS
SELECT run_id, king AS model_id, avg(u_king) AS mean_payoff, count(*) AS cells
FROM payoffs
GROUP BY run_id, king;

-- Contributions grouped by the rebel's model family (paper Section 4.3, Fig. 5).
CREATE OR REPLACE VIEW contributions_by_family AS
SELECT c.run_id, c.method, c.king, coalesce(m.family, c.rebel) AS rebel_family, sum(c.delta) AS delta
FROM contributions c
LEFT JOIN models m ON m.model_id = c.rebel
GROUP BY c.run_id, c.method, c.king, coalesce(m.family, c.rebel);

-- How many actions of each player an equilibrium supports (marginal mass >= 1e-6).
CREATE OR REPLACE VIEW equilibrium_support AS
SELECT run_id, method, player,
       count(*) FILTER (WHERE mass >= 1e-6) AS support,
       count(*) AS actions
FROM equilibrium_marginals
GROUP BY run_id, method, player;
