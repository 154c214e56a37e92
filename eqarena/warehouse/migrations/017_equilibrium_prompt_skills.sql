-- eqarena warehouse, migration 017: the equilibrium-weighted prompt skills of a simulated improvement
-- path (paper Figure 4 right): sum_p x_p p over the prompts' skill vectors p, x the prompt player's
-- equilibrium at that iteration. NULL for a model-rating method (elo) and for runs written before.

ALTER TABLE simulation_steps ADD COLUMN IF NOT EXISTS equilibrium_prompt_skills DOUBLE[];
