"""Coarse correlated equilibria: the maximum relative entropy CCE (paper eq. (4), App. A), its dual and
Newton solver, its batched form, and deviation ratings built on CCEs."""
