"""The process side of a command: worker pools (local processes, Dask), workers that die with their
command, ending a process quickly, background threads, and JAX's compilation cache."""
