"""What every flow records about itself: its run id, the package versions it ran with, its `runs` row.

with RunLog(db, "ingest", parameters) as log:     # a `running` row now (start=True)
    with log.timed("read"):
        ...
    log.finish(message="...", data_fingerprint=...)  # the `ok` row
# an exception inside the block leaves a `failed` row with its message (`interrupted` for Ctrl-C), then
# propagates; one from publishing the readers' snapshot after the finished row leaves that row as it is
"""

from __future__ import annotations

import logging
import platform
import uuid
from contextlib import closing, contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from time import perf_counter
from typing import Iterator

from eqarena import warehouse
from eqarena.messages import bounded
from eqarena.orchestration.runtime import current_flow_run_id
from eqarena.orchestration.steps import step
from eqarena.warehouse.connection import interrupted_query
from eqarena.warehouse.runs import RunRecord, upsert_run
from eqarena.warehouse.snapshot import SnapshotNotPublished, publish_snapshot

_log = logging.getLogger("eqarena.runs")

VERSIONED = ("eqarena", "jax", "numpy", "duckdb", "prefect")


def new_run_id(kind: str) -> str:
    """'<kind>-<UTC time>-<6 hex digits>', e.g. rate-20261126T041307-3fa2c1."""
    return f"{kind}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def warehouse_path(db: str | None) -> Path:
    """The absolute path of the warehouse file `db` names (default: $EQARENA_DB, else ./eqarena.duckdb)."""
    return warehouse.resolve_db_path(db).resolve()


def package_versions() -> dict[str, str]:
    """Python's and the main packages' versions, stored with every run."""
    versions = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def outcome_head(failure: BaseException | None, stopped_by: str | None) -> str:
    """How a run of provider calls ended, first in its message: `interrupted`, `failed: <error>`,
    `stopped at the --<cap> cap` or `done`."""
    if isinstance(failure, KeyboardInterrupt):
        return "interrupted"
    if failure is not None:
        return f"failed: {type(failure).__name__}: {bounded(failure)}"
    if stopped_by is not None:
        return f"stopped at the --{stopped_by} cap"
    return "done"


@step("record_run")
def record_run(db: str | None, run: RunRecord) -> None:
    """Insert or update the run's row in `runs`; once the run has finished, publish the readers'
    snapshot of the warehouse (eqarena/warehouse/snapshot.py)."""
    with closing(warehouse.connect(db)) as con:
        upsert_run(con, run)
        if run.status != "running":
            publish_snapshot(con)


class RunLog:
    """The `runs` row of one flow run: its id, parameters, timings and outcome (module docstring).

    start=False writes nothing until `finish` (a rate run's row is written in the transaction of its
    results: `record()` builds it, the caller writes it)."""

    def __init__(self, db: str | None, kind: str, parameters: dict, *, start: bool = True):
        self.db, self.kind, self.start = db, kind, start
        self.run = RunRecord(
            run_id=new_run_id(kind),
            kind=kind,
            started_at=datetime.now(timezone.utc),
            status="running",
            parameters=parameters,
            versions=package_versions(),
            flow_run_id=current_flow_run_id(),
            message="running",
        )
        self.timings: dict[str, float] = {}

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def __enter__(self) -> RunLog:
        if self.start:
            record_run(self.db, self.run)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is None or not self.start or isinstance(exc, SnapshotNotPublished):
            return  # (the run's row was written before its snapshot could not be: it stays as recorded)
        failed = self.record(
            "interrupted" if isinstance(exc, KeyboardInterrupt) or interrupted_query(exc) else "failed",
            message=bounded(exc) or type(exc).__name__,
        )
        try:
            record_run(self.db, failed)
        except SnapshotNotPublished:  # the row is written; the run's own error says what went wrong
            pass
        except Exception as error:  # a damaged or busy warehouse: the run's own error is what matters
            _log.warning("could not record run %s as %s: %s", self.run_id, failed.status, bounded(error))

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Add the block's seconds to timings[step]."""
        t0 = perf_counter()
        try:
            yield
        finally:
            self.timings[step] = self.timings.get(step, 0.0) + perf_counter() - t0

    def record(self, status: str = "ok", **fields) -> RunRecord:
        """The finished row (status, timings so far, `fields` such as message or data_fingerprint)."""
        return replace(
            self.run, status=status, finished_at=datetime.now(timezone.utc), timings=dict(self.timings), **fields
        )

    def finish(self, status: str = "ok", **fields) -> RunRecord:
        """Write the finished row and return it."""
        run = self.record(status, **fields)
        record_run(self.db, run)
        return run
