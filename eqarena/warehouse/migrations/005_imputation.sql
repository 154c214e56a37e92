-- eqarena warehouse, migration 005: ratings that rest on imputed payoffs (`rate --missing impute`).
--
-- payoffs.imputed: the cell lacked an ok judgment in at least one of the two orders (position balance
-- needs both); its u_king is the pair's prompt-wise Bradley-Terry prediction (eqarena/solvers/sparse/imputation.py),
-- not a judged mean.
-- ratings.imputed_share: the share of the rating's deviation payoff that comes from imputed cells,
-- weighted by the equilibrium's distribution over the other players (0: rests on judged cells only;
-- NULL: no imputation in the run, or bt, which is fit on the judged battles alone).

ALTER TABLE payoffs ADD COLUMN IF NOT EXISTS imputed BOOLEAN DEFAULT false;
ALTER TABLE ratings ADD COLUMN IF NOT EXISTS imputed_share DOUBLE;

CREATE OR REPLACE VIEW latest_model_ratings AS
SELECT r.run_id, l.dataset, r.method, r.action AS model_id, m.family,
       r.rating, r.rank, r.mass, r.ci_lo, r.ci_hi, r.imputed_share
FROM ratings r
JOIN latest_rate_run l USING (run_id)
LEFT JOIN models m ON m.model_id = r.action
WHERE r.player = 'king'
ORDER BY r.method, r.rank, r.action;

-- Per rate run: how many (prompt, unordered model pair) cells were judged and how many imputed.
CREATE OR REPLACE VIEW payoff_imputation AS
SELECT run_id,
       count(*) AS cells,
       count(*) FILTER (WHERE imputed) AS imputed_cells,
       count(*) FILTER (WHERE imputed) / count(*) AS imputed_fraction
FROM payoffs
WHERE king < rebel
GROUP BY run_id;
