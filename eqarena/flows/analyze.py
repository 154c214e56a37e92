"""Flows `analyze-clones` and `analyze-risk`: the analysis pipelines (eqarena/pipelines/analyze.py) as
Prefect flows."""

from prefect import flow

from eqarena.options import CloneOptions, RiskOptions
from eqarena.pipelines.analyze import AnalysisResult, analyze_clones, analyze_risk


@flow(name="analyze-clones")
def clones_flow(
    options: CloneOptions = CloneOptions(), run_id: str | None = None, db: str | None = None
) -> AnalysisResult:
    """Rank the models by every method as adversarial prompt copies are added (paper Section 4.2)."""
    return analyze_clones(options, run_id, db)


@flow(name="analyze-risk")
def risk_flow(options: RiskOptions = RiskOptions(), run_id: str | None = None, db: str | None = None) -> AnalysisResult:
    """Rank a rate run's Nash equilibria by risk (paper App. F.4)."""
    return analyze_risk(options, run_id, db)
