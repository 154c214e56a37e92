"""Analyses of a rated game: clone robustness (paper Section 4.2), risk dominance (App. F.4), rating
contributions (Section 4.3) and the simulated improvement path (Section 2)."""
