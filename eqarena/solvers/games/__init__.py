"""Games and what every equilibrium solver shares: normal-form and king-of-the-hill games (paper Section 3.1),
entropies and the clone-invariant selection target (Section 3.3), the `Equilibrium` result type."""
