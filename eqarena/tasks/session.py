"""A run's hold on the warehouse while it calls a provider (judge, generate): one writable connection for
its whole length, the only writer of what the run stores as calls return."""

from __future__ import annotations

from eqarena import warehouse
from eqarena.warehouse.runs import RunRecord
from eqarena.warehouse.snapshot import publish_snapshot


class WarehouseSession:
    """Opens the connection, lets the subclass read what it needs (`load`), and closes the connection on
    exit or when loading fails. Use as a context manager."""

    def __init__(self, db: str | None):
        self.con = warehouse.connect(db)
        try:
            self.load()
        except BaseException:
            self.con.close()
            raise

    def load(self) -> None:
        """Read what the run needs from `self.con` (nothing by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.con.close()

    def write_run(self, run: RunRecord) -> None:
        """Write the run's `runs` row (a subclass makes it its flow's task)."""
        raise NotImplementedError

    def record(self, run: RunRecord) -> None:
        """Write the run's row; once it has finished, publish the readers' snapshot too."""
        self.write_run(run)
        if run.status != "running":
            publish_snapshot(self.con)
