"""How many worker processes a rate run's bootstrap will solve on, read off its options alone.

Light on purpose (no solvers, no JAX): a command computes it before it imports the rest, so that the
workers (`parallel.workers_ahead`) import while the command itself still does.
"""

from __future__ import annotations

import os

from eqarena.methods import enabled_methods, get_method, parse_methods
from eqarena.options import MainJobOptions, RateOptions, is_recorded_judge

# Equilibrium solves (replicates x methods x schemes) from which the bootstrap uses worker processes:
# below, their start-up (~2 s) costs more than it saves.
PARALLEL_FROM = 200


def bootstrap_workers(solves: int) -> int:
    """Worker processes for `solves` equilibrium solves: one per core, at most two, from `PARALLEL_FROM`."""
    return min(2, os.cpu_count() or 1) if solves >= PARALLEL_FROM else 1


def chosen_methods(options: RateOptions) -> tuple[str, ...]:
    """`options.methods` (None: the defaults), with the methods its options enable (`methods.enabled_methods`:
    win rate when a baseline is named, style-controlled BT under style control)."""
    methods = parse_methods(options.methods)
    extra = enabled_methods(options)
    return parse_methods(methods + extra) if extra else methods


def planned_bootstrap_workers(options: RateOptions) -> int:
    """Worker processes the bootstrap will solve on, as far as the options tell (0: none; it may still
    use fewer once the data is known): to start them ahead of it."""
    methods = [m for m in chosen_methods(options) if get_method(m).is_equilibrium]
    if options.bootstrap.dask_address is not None:  # the replicates run on the Dask cluster
        return 0
    if options.bootstrap.replicates < 2 or options.bootstrap.replicates * len(methods) < PARALLEL_FROM:
        return 0
    return bootstrap_workers(options.bootstrap.replicates * len(methods))


def planned_main_job_workers(options: MainJobOptions) -> int:
    """`planned_bootstrap_workers` of the main job's rate run; 0 when a judge must judge first (the
    workers would wait for it)."""
    return planned_bootstrap_workers(options.rate) if is_recorded_judge(options.judge) else 0
