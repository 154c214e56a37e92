"""Bootstrap confidence of equilibrium ratings: replicates, their exact or batched solves, intervals and
rank probabilities."""
