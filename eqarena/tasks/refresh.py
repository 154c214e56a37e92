"""Tasks of the refresh flow: what the last runs already cover, so unchanged inputs cost nothing, and
the writer lock a refresh holds for its whole length."""

from __future__ import annotations

from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Iterator

from eqarena import warehouse
from eqarena.options import RateOptions
from eqarena.orchestration.steps import run_logger, step
from eqarena.tasks.assemble import category_group, expand_judges
from eqarena.warehouse.analyses import latest_analysis
from eqarena.warehouse.connection import lock_wait_s
from eqarena.warehouse.prompt_groups import check_group
from eqarena.warehouse.runs import matching_rate_run
from eqarena.warehouse.tensor import assemble_tensor, available_judges
from eqarena.warehouse.writer_lock import writer_lock


@dataclass(frozen=True)
class RateInputs:
    """The judges a rate run would pool and the content hash of the data it would read."""

    judges: tuple[str, ...]
    fingerprint: str


@contextmanager
def writing_the_warehouse(db: str | None, run_id: str, wait_s: float | None) -> Iterator[None]:
    """Hold the warehouse's writer lock for the block, waiting up to `wait_s` seconds (default: the
    warehouse's lock wait, $EQARENA_WAIT) with a warning naming the run that writes, for another run to
    finish; WarehouseBusyError after that."""
    db_path = warehouse.resolve_db_path(db).resolve()
    wait_s = lock_wait_s() if wait_s is None else wait_s

    def waiting(holder: dict) -> None:
        run_logger().warning(
            f"warehouse {db_path} is being written by run {holder.get('run_id', '?')}; waiting up to {wait_s:g} s"
        )

    with writer_lock(db_path, run_id, wait_s, on_wait=waiting):
        yield


@step("fingerprint_rate_inputs")
def fingerprint_rate_inputs(db: str | None, options: RateOptions) -> RateInputs:
    """The judges `options.judges` expands to and the fingerprint of their judgments on the dataset
    (the hash a rate run stores as `data_fingerprint`), without solving anything."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        chosen = expand_judges(options.dataset, available_judges(con, options.dataset), list(options.judges))
        group = category_group(options)
        if group is not None:
            check_group(con, options.dataset, group)
        tensor = assemble_tensor(con, options.dataset, chosen, orders=options.orders, group=group)
    return RateInputs(judges=tuple(tensor.judges), fingerprint=tensor.fingerprint)


@step("find_current_rate_run")
def find_current_rate_run(db: str | None, fingerprint: str, parameters: dict) -> str | None:
    """The newest finished rate run of the same data and parameters, or None."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        return matching_rate_run(con, fingerprint, parameters)


@step("current_analyses")
def current_analyses(db: str | None, rate_run_id: str, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """Those of the analyses `kinds` the rate run has a finished run of."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        return tuple(kind for kind in kinds if latest_analysis(con, kind, rate_run_id))
