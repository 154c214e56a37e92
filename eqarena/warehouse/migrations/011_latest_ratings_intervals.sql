-- eqarena warehouse, migration 011: `latest_model_ratings` carries every method's interval.
--
-- ci_lo / ci_hi: a model-rating method's own interval (bt), else the equilibrium's bootstrap interval
-- over prompts (rating_intervals, scheme 'prompts'); NULL when the run had no bootstrap.
-- p_top1 / p_top3: P(rank <= 1 / 3) over the same replicates (NULL for bt and without a bootstrap).
-- The judge-noise intervals (scheme 'judgments') stay in rating_intervals.

CREATE OR REPLACE VIEW latest_model_ratings AS
SELECT r.run_id, l.dataset, r.method, r.action AS model_id, m.family,
       r.rating, r.rank, r.mass,
       coalesce(r.ci_lo, i.lo) AS ci_lo, coalesce(r.ci_hi, i.hi) AS ci_hi,
       r.imputed_share, i.p_top1, i.p_top3
FROM ratings r
JOIN latest_rate_run l USING (run_id)
LEFT JOIN models m ON m.model_id = r.action
LEFT JOIN rating_intervals i
       ON i.run_id = r.run_id AND i.method = r.method AND i.model_id = r.action AND i.scheme = 'prompts'
WHERE r.player = 'king'
ORDER BY r.method, r.rank, r.action;
