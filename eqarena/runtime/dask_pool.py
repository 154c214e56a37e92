"""Bootstrap replicates on a Dask cluster (`rate --dask-address`), the engine the judge's `--runner
dask` uses, for when one machine's cores are not enough.

`dask_map(address)` is a `map_units` for `solvers.bootstrap.confidence.bootstrap_ratings`: the replicate solver (the
full data) is scattered to every worker once, each unit of replicates is one Dask task, and the results
come back in the units' order, so the bootstrap's settling rule and its replicates are the same as on this
machine's processes (a replicate depends only on the seed, the scheme and its index). A map the caller
stops early cancels the units not yet done. Workers need eqarena installed (they import its solvers).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eqarena.solvers.bootstrap.confidence import ReplicateSolver, Unit, UnitMap, UnitResult


def _solve_unit(solver: ReplicateSolver, unit: Unit) -> UnitResult:
    return solver(unit)


def dask_map(address: str) -> UnitMap:
    """A `map_units` over the Dask scheduler at `address` (e.g. tcp://10.0.0.5:8786)."""

    def run(solver: ReplicateSolver, units: Sequence[Unit]) -> Iterator[UnitResult]:
        from distributed import Client

        client = Client(address, set_as_default=False)
        futures = []
        try:
            shared = client.scatter(solver, broadcast=True, hash=False)
            futures = [client.submit(_solve_unit, shared, unit, pure=False) for unit in units]
            for future in futures:
                yield future.result()
        finally:  # settled early, an error or an interrupt: what is not done is cancelled
            pending = [f for f in futures if not f.done()]
            if pending:
                client.cancel(pending)
            client.close()

    return run
