-- eqarena warehouse, migration 009: the per-cell tables of a rate run lose their PRIMARY KEY.
-- payoffs holds P x M x (M - 1) rows per run (32 million for 805 prompts x 200 models) and
-- equilibrium_joint up to as many; DuckDB's index on their four text key columns made the commit of a
-- large run take minutes and gigabytes. A run's rows stay unique per cell: a rate run writes them once,
-- in one transaction, after deleting any earlier rows of its run_id (eqarena/warehouse/ratings.py).

CREATE TABLE payoffs_009 (
    run_id      VARCHAR NOT NULL,
    prompt_id   VARCHAR NOT NULL,
    king        VARCHAR NOT NULL,   -- model i
    rebel       VARCHAR NOT NULL,   -- model j
    u_king      DOUBLE NOT NULL,    -- mean judged preference of i over j on the prompt, in [-1, 1]
    samples     INTEGER NOT NULL,   -- ok judgments behind the cell (both orders, all judges)
    imputed     BOOLEAN DEFAULT false
);
INSERT INTO payoffs_009 SELECT run_id, prompt_id, king, rebel, u_king, samples, imputed FROM payoffs;
DROP TABLE payoffs;
ALTER TABLE payoffs_009 RENAME TO payoffs;

CREATE TABLE equilibrium_joint_009 (
    run_id     VARCHAR NOT NULL,
    method     VARCHAR NOT NULL,
    prompt_id  VARCHAR NOT NULL,
    king       VARCHAR NOT NULL,
    rebel      VARCHAR NOT NULL,
    mass       DOUBLE NOT NULL
);
INSERT INTO equilibrium_joint_009 SELECT run_id, method, prompt_id, king, rebel, mass FROM equilibrium_joint;
DROP TABLE equilibrium_joint;
ALTER TABLE equilibrium_joint_009 RENAME TO equilibrium_joint;
