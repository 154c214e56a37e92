"""Flow `rate`: the rate pipeline (eqarena/pipelines/rate.py) as a Prefect flow."""

from prefect import flow

from eqarena.options import RateOptions
from eqarena.orchestration.runtime import rate_run_name
from eqarena.pipelines.rate import RateResult, rate


@flow(name="rate", flow_run_name=rate_run_name)
def rate_flow(options: RateOptions, db: str | None = None) -> RateResult:
    """Rate the models and prompts of `options.dataset` by each of `options.methods`; one new rate run."""
    return rate(options, db)
