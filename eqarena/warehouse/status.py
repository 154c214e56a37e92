"""SQL for `eqarena status`: row counts and judge coverage.

Coverage of a judge: over every dataset the judge has judgments in, a *cell* is
(prompt, model_a, model_b) with model_a != model_b, both models of that dataset (those with a
response in it; for a dataset without responses, such as imported judgments, those judged in it), so
P x M x (M - 1) ordered cells per dataset. A cell is *complete* when the judge has at least one
`ok` judgment of it, under any template. coverage = complete cells / all cells, summed over the
judge's datasets. Position-balanced judging of every pair therefore gives 1.0; judging each model
only against one baseline gives about 2 / M.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from eqarena.exceptions import NotFoundError
from eqarena.warehouse.catalog import has_scores


@dataclass(frozen=True)
class DatasetCounts:
    dataset: str
    prompts: int
    models: int
    responses: int
    judgments: int


@dataclass(frozen=True)
class JudgeCoverage:
    judge: str
    judgments: int  # rows of any status
    ok: int
    complete_cells: int
    cells: int

    @property
    def coverage(self) -> float:
        return self.complete_cells / self.cells if self.cells else 0.0


@dataclass(frozen=True)
class WarehouseStatus:
    prompts: int
    models: int
    responses: int
    datasets: tuple[DatasetCounts, ...]
    judges: tuple[JudgeCoverage, ...]

    def as_json(self) -> dict:
        """{"prompts", "models", "responses", "judgments": {judge: n}, "coverage": {judge: fraction}}."""
        return {
            "prompts": self.prompts,
            "models": self.models,
            "responses": self.responses,
            "judgments": {j.judge: j.judgments for j in self.judges},
            "coverage": {j.judge: j.coverage for j in self.judges},
        }


_JUDGED = "judged AS (SELECT judge, dataset, prompt_id, model_a, model_b, status FROM judgments)"
_JUDGED_WITH_SCORES = """
judged AS (
    SELECT judge, dataset, prompt_id, model_a, model_b, status FROM judgments
    UNION ALL
    SELECT a.judge, a.dataset, a.prompt_id, a.model_id, b.model_id, 'ok' FROM scores a JOIN scores b
        ON a.judge = b.judge AND a.template_hash = b.template_hash AND a.dataset = b.dataset
           AND a.prompt_id = b.prompt_id AND a.model_id <> b.model_id
)"""

_DATASET_MODELS = """
dataset_models AS (
    SELECT dataset, model_id FROM responses
    UNION SELECT dataset, m FROM (SELECT dataset, model_a AS m FROM judged
                                  UNION SELECT dataset, model_b FROM judged)
          WHERE dataset NOT IN (SELECT dataset FROM responses)
)"""

_JUDGE_COVERAGE = f"""
{_DATASET_MODELS},
dataset_sizes AS (
    SELECT p.dataset, p.n_prompts, coalesce(m.n_models, 0) AS n_models
    FROM (SELECT dataset, count(*) AS n_prompts FROM prompts GROUP BY dataset) p
    LEFT JOIN (SELECT dataset, count(*) AS n_models FROM dataset_models GROUP BY dataset) m
        USING (dataset)
),
judge_datasets AS (SELECT DISTINCT judge, dataset FROM judged),
cells AS (
    SELECT jd.judge, sum(coalesce(s.n_prompts * s.n_models * (s.n_models - 1), 0)) AS cells
    FROM judge_datasets jd LEFT JOIN dataset_sizes s USING (dataset)
    GROUP BY jd.judge
),
complete AS (
    SELECT judge, count(*) AS complete_cells
    FROM (
        SELECT DISTINCT j.judge, j.dataset, j.prompt_id, j.model_a, j.model_b
        FROM judged j
        JOIN prompts p ON p.dataset = j.dataset AND p.prompt_id = j.prompt_id
        WHERE j.status = 'ok'
          AND EXISTS (SELECT 1 FROM dataset_models m WHERE m.dataset = j.dataset AND m.model_id = j.model_a)
          AND EXISTS (SELECT 1 FROM dataset_models m WHERE m.dataset = j.dataset AND m.model_id = j.model_b)
    )
    GROUP BY judge
),
counts AS (
    SELECT judge, count(*) AS judgments, count(*) FILTER (WHERE status = 'ok') AS ok
    FROM judged GROUP BY judge
)
SELECT c.judge, c.judgments, c.ok, coalesce(k.complete_cells, 0), coalesce(x.cells, 0)
FROM counts c LEFT JOIN complete k USING (judge) LEFT JOIN cells x USING (judge)
ORDER BY c.judge
"""

_DATASET_COUNTS = f"""
{_DATASET_MODELS}
SELECT d.dataset,
       (SELECT count(*) FROM prompts p WHERE p.dataset = d.dataset),
       (SELECT count(*) FROM dataset_models m WHERE m.dataset = d.dataset),
       (SELECT count(*) FROM responses r WHERE r.dataset = d.dataset),
       (SELECT count(*) FROM judged j WHERE j.dataset = d.dataset)
FROM (SELECT dataset FROM prompts UNION SELECT dataset FROM judged) d
ORDER BY d.dataset
"""


def warehouse_status(con: duckdb.DuckDBPyConnection) -> WarehouseStatus:
    """Counts of every catalog table, per dataset, and coverage per judge (module docstring)."""
    prompts, models, responses = con.execute(
        "SELECT (SELECT count(*) FROM prompts), (SELECT count(*) FROM models), (SELECT count(*) FROM responses)"
    ).fetchone()
    judged = "WITH " + (_JUDGED_WITH_SCORES if has_scores(con) else _JUDGED) + ","
    return WarehouseStatus(
        prompts=prompts,
        models=models,
        responses=responses,
        datasets=tuple(DatasetCounts(*row) for row in con.execute(judged + _DATASET_COUNTS).fetchall()),
        judges=tuple(JudgeCoverage(*row) for row in con.execute(judged + _JUDGE_COVERAGE).fetchall()),
    )


def table_row_count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Rows in one of the warehouse's tables (name checked against the catalog)."""
    known = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if table not in known:
        raise NotFoundError(f"no table {table!r} in the warehouse")
    return con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
