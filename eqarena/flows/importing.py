"""Flow `import`: the import pipeline (eqarena/pipelines/importing.py) as a Prefect flow."""

from prefect import flow

from eqarena.options import ImportOptions
from eqarena.pipelines.importing import import_data
from eqarena.tasks.importing import ImportSummary


@flow(name="import")
def import_flow(options: ImportOptions, db: str | None = None) -> ImportSummary:
    """Import `options.paths` in format `options.fmt` (arena-hard-auto, battles, pairwise, scores)."""
    return import_data(options, db)
