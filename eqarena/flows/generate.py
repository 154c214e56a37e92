"""Flow `generate`: the generate pipeline (eqarena/pipelines/generate.py) as a Prefect flow."""

from prefect import flow

from eqarena.generation.setup import GenerateOutcome
from eqarena.options import GenerateOptions
from eqarena.orchestration.runtime import generate_run_name
from eqarena.pipelines.generate import generate


@flow(name="generate", flow_run_name=generate_run_name)
def generate_flow(options: GenerateOptions, db: str | None = None, progress: bool = True) -> GenerateOutcome:
    """Answer every chosen prompt of `options.dataset` that model `options.model_id` has no answer to yet;
    `progress` draws a progress bar on stderr."""
    return generate(options, db, progress)
