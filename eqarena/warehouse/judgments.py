"""SQL for the judgments table: inserting judge samples (idempotently), the per-cell view the judge
plan subtracts, and the write buffer that commits judgments as they return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import duckdb

from eqarena.warehouse.buffer import WriteBuffer
from eqarena.warehouse.inserts import RowTable


@dataclass(frozen=True)
class JudgmentRow:
    """One judge call sample; score is from assistant A's (model_a's) point of view."""

    judge: str
    template_hash: str
    dataset: str
    prompt_id: str
    model_a: str
    model_b: str
    sample_index: int
    status: str  # 'ok' | 'unparsed' | 'error'
    verdict: str | None = None
    score: float | None = None
    raw_text: str | None = None
    error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_s: float | None = None
    run_id: str | None = None


_TYPES = {
    "judge": "VARCHAR",
    "template_hash": "VARCHAR",
    "dataset": "VARCHAR",
    "prompt_id": "VARCHAR",
    "model_a": "VARCHAR",
    "model_b": "VARCHAR",
    "sample_index": "INTEGER",
    "status": "VARCHAR",
    "verdict": "VARCHAR",
    "score": "DOUBLE",
    "raw_text": "VARCHAR",
    "error": "VARCHAR",
    "tokens_in": "INTEGER",
    "tokens_out": "INTEGER",
    "latency_s": "DOUBLE",
    "run_id": "VARCHAR",
}
_KEY = "judge, template_hash, dataset, prompt_id, model_a, model_b, sample_index"


JUDGMENTS = RowTable("judgments", _KEY, _TYPES)


def insert_judgments(con: duckdb.DuckDBPyConnection, rows: Iterable[JudgmentRow]) -> int:
    """Insert rows whose key is not present yet; returns how many were new. Runs in the caller's
    transaction if one is open (so a failing import writes nothing)."""
    return JUDGMENTS.insert(con, rows)


@dataclass(frozen=True)
class CellState:
    """What the warehouse holds for one ordered cell (prompt, model_a, model_b) of a judge + template.

    `pending` counts samples reserved by unfinished Batch API jobs; `next_index` is the first sample
    index used by neither a judgment nor a pending job.
    """

    ok: int = 0
    unparsed: int = 0
    error: int = 0
    pending: int = 0
    next_index: int = 0


def cell_states(
    con: duckdb.DuckDBPyConnection, judge: str, template_hash: str, dataset: str
) -> dict[tuple[str, str, str], CellState]:
    """{(prompt_id, model_a, model_b): CellState} for every cell with a judgment or a pending batch
    request of this judge and template on `dataset`."""
    rows = con.execute(
        """
        WITH held AS (
            SELECT prompt_id, model_a, model_b,
                   count(*) FILTER (WHERE status = 'ok') AS ok,
                   count(*) FILTER (WHERE status = 'unparsed') AS unparsed,
                   count(*) FILTER (WHERE status = 'error') AS error,
                   0 AS pending,
                   max(sample_index) + 1 AS next_index
            FROM judgments
            WHERE judge = $judge AND template_hash = $template_hash AND dataset = $dataset
            GROUP BY ALL
            UNION ALL
            SELECT r.prompt_id, r.model_a, r.model_b, 0, 0, 0, sum(r.n), max(r.first_sample + r.n)
            FROM judge_batch_requests r JOIN judge_batches b USING (job_id)
            WHERE b.judge = $judge AND b.template_hash = $template_hash AND b.dataset = $dataset
              AND b.status IN ('prepared', 'uploaded', 'submitted')
            GROUP BY ALL
        )
        SELECT prompt_id, model_a, model_b, sum(ok), sum(unparsed), sum(error), sum(pending), max(next_index)
        FROM held GROUP BY ALL
        """,
        {"judge": judge, "template_hash": template_hash, "dataset": dataset},
    ).fetchall()
    return {
        (p, a, b): CellState(int(ok), int(unp), int(err), int(pend), int(nxt))
        for p, a, b, ok, unp, err, pend, nxt in rows
    }


def judgment_counts(
    con: duckdb.DuckDBPyConnection, judge: str, template_hash: str | None = None, dataset: str | None = None
) -> dict[str, int]:
    """{status: rows} of a judge (optionally one template / dataset)."""
    rows = con.execute(
        "SELECT status, count(*) FROM judgments WHERE judge = $judge "
        "AND ($template_hash IS NULL OR template_hash = $template_hash) "
        "AND ($dataset IS NULL OR dataset = $dataset) GROUP BY status",
        {"judge": judge, "template_hash": template_hash, "dataset": dataset},
    ).fetchall()
    return {status: int(n) for status, n in rows}


class JudgmentWriter(WriteBuffer[JudgmentRow]):
    """The write buffer of a judge run (eqarena/warehouse/buffer.py): judgments are committed as they
    return, within `max_delay_s` or `max_rows`, each flush one idempotent insert."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, max_delay_s: float = 0.25, max_rows: int = 64):
        super().__init__(con, JUDGMENTS, max_delay_s=max_delay_s, max_rows=max_rows)


def read_ok_scores(con: duckdb.DuckDBPyConnection, judge: str, dataset: str) -> list[tuple[str, str, str, float]]:
    """(prompt_id, model_a, model_b, score) of every ok sample of a judge on a dataset, unaggregated."""
    return con.execute(
        "SELECT prompt_id, model_a, model_b, score FROM judgments WHERE dataset = ? AND judge = ? AND status = 'ok'",
        [dataset, judge],
    ).fetchall()


def read_recorded_judgments(con: duckdb.DuckDBPyConnection, judge: str):
    """A judge's ok and unparsed samples on every dataset, with the texts a replay must recognise.

    Returns (rows, questions, answers): rows (dataset, prompt_id, model_a, model_b, sample_index, score,
    verdict, raw_text, tokens_out) ordered by cell and sample index (one template: the first, per cell);
    questions {(dataset, prompt_id): text}; answers {(dataset, prompt_id, model_id): text}.
    """
    rows = con.execute(
        """
        WITH first_template AS (
            SELECT dataset, prompt_id, model_a, model_b, min(template_hash) AS template_hash
            FROM judgments WHERE judge = $judge AND status IN ('ok', 'unparsed') GROUP BY ALL
        )
        SELECT j.dataset, j.prompt_id, j.model_a, j.model_b, j.sample_index, j.score, j.verdict, j.raw_text,
               j.tokens_out
        FROM judgments j JOIN first_template USING (dataset, prompt_id, model_a, model_b, template_hash)
        WHERE j.judge = $judge AND j.status IN ('ok', 'unparsed')
        ORDER BY j.dataset, j.prompt_id, j.model_a, j.model_b, j.sample_index
        """,
        {"judge": judge},
    ).fetchall()
    datasets = sorted({r[0] for r in rows})
    questions = {
        (d, p): t
        for d, p, t in con.execute(
            "SELECT dataset, prompt_id, text FROM prompts WHERE list_contains($d, dataset)", {"d": datasets}
        ).fetchall()
    }
    answers = {
        (d, p, m): t
        for d, p, m, t in con.execute(
            "SELECT dataset, prompt_id, model_id, text FROM responses WHERE list_contains($d, dataset)", {"d": datasets}
        ).fetchall()
    }
    return rows, questions, answers


def read_replay_next_indices(con: duckdb.DuckDBPyConnection, judge: str) -> list[tuple[str, str, str, str, str, int]]:
    """(template_hash, dataset, prompt_id, model_a, model_b, next sample index) of every cell `judge` has rows for."""
    return con.execute(
        "SELECT template_hash, dataset, prompt_id, model_a, model_b, max(sample_index) + 1 FROM judgments "
        "WHERE judge = ? GROUP BY ALL",
        [judge],
    ).fetchall()


def read_samples(
    con: duckdb.DuckDBPyConnection, judge: str, template_hash: str, dataset: str
) -> list[tuple[str, str, str, int, str, float | None]]:
    """(prompt_id, model_a, model_b, sample_index, status, score) of every row of a judge + template on a dataset."""
    return con.execute(
        "SELECT prompt_id, model_a, model_b, sample_index, status, score FROM judgments "
        "WHERE judge = ? AND template_hash = ? AND dataset = ? ORDER BY ALL",
        [judge, template_hash, dataset],
    ).fetchall()
