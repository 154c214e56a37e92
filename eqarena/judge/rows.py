"""Turning what a judge returned into `judgments` rows (one per sample), for live and batch runs alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from eqarena.judge.templates import Template
from eqarena.judge.verdict import parse_verdict
from eqarena.llm.providers import Completion
from eqarena.warehouse.judgments import JudgmentRow


@dataclass(frozen=True)
class RowContext:
    """The columns every row of one judge run shares."""

    judge: str
    template: Template
    dataset: str
    run_id: str | None = None


def _split(total: int | None, parts: int) -> list[int | None]:
    """`total` shared over `parts` rows (remainder on the first), so the rows sum to the request's usage."""
    if total is None:
        return [None] * parts
    base, extra = divmod(total, parts)
    return [base + (extra if k == 0 else 0) for k in range(parts)]


def sample_rows(
    ctx: RowContext,
    cell: tuple[str, str, str],
    indices: Sequence[int],
    completion: Completion,
    latency_s: float | None = None,
) -> tuple[list[JudgmentRow], int]:
    """Rows for the samples `indices` answered by `completion` (texts in the same order); status 'ok'
    with the parsed verdict and score, or 'unparsed'. Returns the rows and how many are unparsed."""
    prompt_id, model_a, model_b = cell
    k = len(indices)
    tokens_in, tokens_out = _split(completion.tokens_in, k), _split(completion.tokens_out, k)
    rows, unparsed = [], 0
    for i, index in enumerate(indices):
        text = completion.texts[i] if i < len(completion.texts) else ""
        verdict = parse_verdict(text, ctx.template)
        unparsed += verdict is None
        rows.append(
            JudgmentRow(
                judge=ctx.judge,
                template_hash=ctx.template.hash,
                dataset=ctx.dataset,
                prompt_id=prompt_id,
                model_a=model_a,
                model_b=model_b,
                sample_index=index,
                status="ok" if verdict else "unparsed",
                verdict=verdict.label if verdict else None,
                score=verdict.score if verdict else None,
                raw_text=text,
                error=None if verdict or text else "no output returned",
                tokens_in=tokens_in[i],
                tokens_out=tokens_out[i],
                latency_s=latency_s,
                run_id=ctx.run_id,
            )
        )
    return rows, unparsed


def error_rows(ctx: RowContext, cell: tuple[str, str, str], indices: Sequence[int], error: str) -> list[JudgmentRow]:
    """Rows with status 'error' for samples whose request failed for good (they are planned again)."""
    prompt_id, model_a, model_b = cell
    return [
        JudgmentRow(
            judge=ctx.judge,
            template_hash=ctx.template.hash,
            dataset=ctx.dataset,
            prompt_id=prompt_id,
            model_a=model_a,
            model_b=model_b,
            sample_index=index,
            status="error",
            error=error,
            run_id=ctx.run_id,
        )
        for index in indices
    ]
