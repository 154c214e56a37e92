"""Nash equilibria: the limiting logit equilibrium selected from a target (paper Section 3.2-3.3), the
logit-QRE equations and continuation it follows, and its batched form for bootstrap replicates."""
