"""Flow `ingest`: the ingest pipeline (eqarena/pipelines/ingest.py) as a Prefect flow."""

from prefect import flow

from eqarena.options import IngestOptions
from eqarena.pipelines.ingest import ingest
from eqarena.tasks.ingest import IngestSummary


@flow(name="ingest")
def ingest_flow(options: IngestOptions = IngestOptions(), db: str | None = None) -> IngestSummary:
    """Ingest `options.source` (a bundled dataset name or a directory) into the warehouse; idempotent."""
    return ingest(options, db)
