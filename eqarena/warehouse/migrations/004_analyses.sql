-- eqarena warehouse, migration 004: the robustness analyses of a rate run (paper Section 4.2 with
-- App. F.5: adversarial clones; App. F.4: risk dominance). Each analysis has its own run_id (runs.kind
-- 'clones' or 'risk', runs.parameters.source_run_id = the rate run it analysed) and writes all its
-- rows in one transaction. Documented for consumers in eqarena/warehouse/VIEWS.md.

-- Ranks and ratings of every model under every method after n copies of prompts adversarial to
-- `target` were added to the rate run's game: exact copies, or copies with Uniform(-0.01, 0.01) payoff
-- noise. n_clones = 0 is the original game (listed under both variants).
CREATE TABLE IF NOT EXISTS clone_robustness (
    run_id          VARCHAR NOT NULL,
    source_run_id   VARCHAR NOT NULL,
    target          VARCHAR NOT NULL,   -- model the copied prompts are adversarial to
    adversary_lambda DOUBLE NOT NULL,   -- copies drawn from softmax(-lambda * mean_rebel u_king(., target, .))
    seed            INTEGER NOT NULL,
    variant         VARCHAR NOT NULL CHECK (variant IN ('exact', 'noisy')),
    n_clones        INTEGER NOT NULL,
    method          VARCHAR NOT NULL,   -- a method of the registry (eqarena/methods.py)
    model_id        VARCHAR NOT NULL,
    rank            INTEGER NOT NULL,   -- dense, 1 = best; ratings within 1e-4 share a rank
    rating          DOUBLE NOT NULL,    -- Elo for bt, deviation gain (paper eq. 1) otherwise
    exploitability  DOUBLE,             -- of the method's equilibrium on that game; NULL for bt
    PRIMARY KEY (run_id, variant, n_clones, method, model_id)
);

-- The copies, in the order they were drawn: the game with n clones holds the first n. Their prompt
-- ids (clone:<source prompt>:<k>) never enter the prompts table.
CREATE TABLE IF NOT EXISTS clone_prompts (
    run_id            VARCHAR NOT NULL,
    draw              INTEGER NOT NULL,   -- 1, 2, ...
    prompt_id         VARCHAR NOT NULL,   -- clone:<source prompt>:<k>
    source_prompt_id  VARCHAR NOT NULL,
    PRIMARY KEY (run_id, draw)
);

-- One sentence per method: did the ranks move as copies were added, and how far did the target fall.
CREATE TABLE IF NOT EXISTS clone_verdicts (
    run_id   VARCHAR NOT NULL,
    method   VARCHAR NOT NULL,
    verdict  VARCHAR NOT NULL,
    PRIMARY KEY (run_id, method)
);

-- Many Nash equilibria of the rate run's game and how risky each is (App. F.4): the expected payoff of
-- each player playing its strategy of equilibrium k while the others play theirs from equilibria drawn
-- under uniform priors, and under the priors after the iterated belief update. Equilibrium 0 is the
-- rate run's selected NE (the limiting logit equilibrium). rank 1 = least risky (largest sum).
CREATE TABLE IF NOT EXISTS risk_dominance (
    run_id          VARCHAR NOT NULL,
    source_run_id   VARCHAR NOT NULL,
    equilibrium     INTEGER NOT NULL,
    is_selected     BOOLEAN NOT NULL,
    exploitability  DOUBLE NOT NULL,
    prompt_uniform  DOUBLE NOT NULL,
    king_uniform    DOUBLE NOT NULL,
    rebel_uniform   DOUBLE NOT NULL,
    sum_uniform     DOUBLE NOT NULL,
    rank_uniform    INTEGER NOT NULL,
    prompt_updated  DOUBLE NOT NULL,
    king_updated    DOUBLE NOT NULL,
    rebel_updated   DOUBLE NOT NULL,
    sum_updated     DOUBLE NOT NULL,
    rank_updated    INTEGER NOT NULL,
    PRIMARY KEY (run_id, equilibrium)
);

-- Ratings (deviation gains, paper eq. 1) and marginal mass of every action under each equilibrium
-- of risk_dominance.
CREATE TABLE IF NOT EXISTS risk_equilibrium_ratings (
    run_id       VARCHAR NOT NULL,
    equilibrium  INTEGER NOT NULL,
    player       VARCHAR NOT NULL CHECK (player IN ('prompt', 'king', 'rebel')),
    action       VARCHAR NOT NULL,
    rating       DOUBLE NOT NULL,
    mass         DOUBLE NOT NULL,
    PRIMARY KEY (run_id, equilibrium, player, action)
);

-- Every pure-strategy Nash equilibrium (prompt, king, rebel) of the rate run's game, enumerated exactly.
CREATE TABLE IF NOT EXISTS pure_nash_equilibria (
    run_id     VARCHAR NOT NULL,
    prompt_id  VARCHAR NOT NULL,
    king       VARCHAR NOT NULL,
    rebel      VARCHAR NOT NULL,
    PRIMARY KEY (run_id, prompt_id, king, rebel)
);

-- Finished analysis runs, newest first, with the rate run each analysed.
CREATE OR REPLACE VIEW analysis_runs AS
SELECT run_id, kind, parameters ->> 'source_run_id' AS source_run_id, started_at, finished_at, parameters
FROM runs
WHERE kind IN ('clones', 'risk') AND status = 'ok'
ORDER BY finished_at DESC;
