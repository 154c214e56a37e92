"""The judge plan: which judge calls are still missing, and what they will cost.

Wanted: chosen prompts x unordered model pairs {i, j} x both orders (i as A, then j as A) x
`samples_per_order` samples (paper Section 3.1 / F: 4 + 4). The plan is that minus what the warehouse
holds for this judge and template: `ok` samples count as done, samples reserved by unfinished batch
jobs as pending; `unparsed` and `error` rows do not count, so those cells are asked again with new
sample indices. A cell that has produced `max_unparsed` unparseable outputs is given up on (it is
reported, never silently zero).

One planned request covers one ordered cell; with multi-sample requests it asks for all of the
cell's missing samples at once (`n` / `candidate_count`), otherwise one request per sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Mapping, Sequence

import duckdb

from eqarena.judge.inputs import JudgeInputs, PlanError
from eqarena.judge.templates import Template
from eqarena.llm.pricing import Price, estimate_message_tokens
from eqarena.warehouse.judgments import CellState, cell_states

Cell = tuple[str, str, str]  # (prompt_id, model_a, model_b): model_a shown first


@dataclass(frozen=True)
class PlannedRequest:
    """The missing samples of one ordered cell. `sample_indices` are the indices to fill;
    `next_free_index` and `unparsed_allowance` let the runner ask again after unparseable output."""

    prompt_id: str
    model_a: str
    model_b: str
    sample_indices: tuple[int, ...]
    next_free_index: int
    unparsed_allowance: int
    tokens_in: int  # estimated prompt tokens of one request

    @property
    def cell(self) -> Cell:
        return (self.prompt_id, self.model_a, self.model_b)


@dataclass(frozen=True)
class JudgePlan:
    """Everything a judge run will ask for, and its estimated size and cost."""

    judge: str
    template: str
    template_hash: str
    dataset: str
    prompts: tuple[str, ...]
    models: tuple[str, ...]
    samples_per_order: int
    multi_sample: bool
    batch: bool
    requests: tuple[PlannedRequest, ...]
    expected_output_tokens: int
    price: Price | None
    done_samples: int = 0
    pending_samples: int = 0
    given_up: tuple[Cell, ...] = ()
    unjudgeable: tuple[tuple[str, str], ...] = field(default=())  # (prompt_id, model_id) without a response

    @property
    def wanted_samples(self) -> int:
        m = len(self.models)
        return len(self.prompts) * m * (m - 1) * self.samples_per_order

    @property
    def samples(self) -> int:
        """Judge calls (samples) to make."""
        return sum(len(r.sample_indices) for r in self.requests)

    @property
    def request_count(self) -> int:
        """HTTP requests (or batch lines) the samples take, if no request fails."""
        return len(self.requests) if self.multi_sample else self.samples

    @property
    def tokens_in(self) -> int:
        per = (lambda r: 1) if self.multi_sample else (lambda r: len(r.sample_indices))
        return sum(r.tokens_in * per(r) for r in self.requests)

    @property
    def tokens_out(self) -> int:
        return self.samples * self.expected_output_tokens

    @property
    def cost_usd(self) -> float | None:
        """Estimated cost; None when the judge model has no price."""
        if self.price is None:
            return None
        return self.price.cost(self.tokens_in, self.tokens_out, batch=self.batch)

    def chunks(self, prompts_per_chunk: int) -> list[tuple[PlannedRequest, ...]]:
        """The requests grouped by prompt, `prompts_per_chunk` prompts per group, in plan order."""
        if prompts_per_chunk < 1:
            raise ValueError("prompts_per_chunk must be at least 1")
        position = {p: k for k, p in enumerate(dict.fromkeys(r.prompt_id for r in self.requests))}
        groups: dict[int, list[PlannedRequest]] = {}
        for request in self.requests:
            groups.setdefault(position[request.prompt_id] // prompts_per_chunk, []).append(request)
        return [tuple(groups[k]) for k in sorted(groups)]

    def summary(self) -> PlanSummary:
        """The numbers `eqarena judge --plan` prints."""
        return PlanSummary(
            judge=self.judge,
            template=self.template,
            template_hash=self.template_hash,
            dataset=self.dataset,
            prompts=len(self.prompts),
            models=list(self.models),
            samples_per_order=self.samples_per_order,
            wanted_samples=self.wanted_samples,
            done_samples=self.done_samples,
            pending_samples=self.pending_samples,
            calls=self.samples,
            requests=self.request_count,
            multi_sample=self.multi_sample,
            batch=self.batch,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            cost_usd=None if self.cost_usd is None else round(self.cost_usd, 6),
            given_up_cells=len(self.given_up),
            unjudgeable=len(self.unjudgeable),
        )


@dataclass(frozen=True)
class PlanSummary:
    """A judge plan in numbers: what is wanted, held, pending in batches, and what the missing calls
    (`calls` samples in `requests` requests) cost in tokens and USD (None: no price)."""

    judge: str
    template: str
    template_hash: str
    dataset: str
    prompts: int
    models: list[str]
    samples_per_order: int
    wanted_samples: int
    done_samples: int
    pending_samples: int
    calls: int
    requests: int
    multi_sample: bool
    batch: bool
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    given_up_cells: int
    unjudgeable: int

    def line(self) -> str:
        """'judge plan for J on D: 1,200 calls, ~2,400,000 tokens, ~$0.84' (cost unknown without a price)."""
        cost = "cost unknown (no price for this judge)" if self.cost_usd is None else f"~${self.cost_usd:.2f}"
        return (
            f"judge plan for {self.judge} on {self.dataset}: {self.calls:,} calls, "
            f"~{self.tokens_in + self.tokens_out:,} tokens, {cost}"
        )


def build_plan(
    *,
    judge: str,
    template: Template,
    dataset: str,
    prompts: Mapping[str, str],
    models: Sequence[str],
    responses: Mapping[tuple[str, str], str],
    held: Mapping[Cell, CellState],
    samples_per_order: int = 4,
    max_unparsed: int | None = None,
    multi_sample: bool = True,
    batch: bool = False,
    price: Price | None = None,
) -> JudgePlan:
    """The missing judge calls (module docstring).

    prompts: {prompt_id: question text} in the order to judge them; models: the models to compare;
    responses: {(prompt_id, model_id): answer text}; held: the warehouse's CellState per ordered cell;
    max_unparsed: unparseable outputs allowed per ordered cell before giving up (default
    `samples_per_order`).
    """
    if samples_per_order < 1:
        raise PlanError(f"--samples-per-order must be at least 1, got {samples_per_order}")
    if len(models) < 2:
        raise PlanError(f"judging needs at least 2 models, got {len(models)}: {', '.join(models) or 'none'}")
    max_unparsed = samples_per_order if max_unparsed is None else max_unparsed
    requests: list[PlannedRequest] = []
    given_up: list[Cell] = []
    unjudgeable = sorted({(p, m) for p in prompts for m in models if (p, m) not in responses})
    done = pending = 0
    for prompt_id, question in prompts.items():
        for first, second in combinations(models, 2):
            for model_a, model_b in ((first, second), (second, first)):
                if (prompt_id, model_a) not in responses or (prompt_id, model_b) not in responses:
                    continue
                state = held.get((prompt_id, model_a, model_b), CellState())
                done += min(state.ok, samples_per_order)
                pending += min(state.pending, max(0, samples_per_order - state.ok))
                missing = samples_per_order - state.ok - state.pending
                if missing <= 0:
                    continue
                allowance = max_unparsed - state.unparsed
                if allowance <= 0:
                    given_up.append((prompt_id, model_a, model_b))
                    continue
                messages = template.messages(question, responses[prompt_id, model_a], responses[prompt_id, model_b])
                start = state.next_index
                requests.append(
                    PlannedRequest(
                        prompt_id=prompt_id,
                        model_a=model_a,
                        model_b=model_b,
                        sample_indices=tuple(range(start, start + missing)),
                        next_free_index=start + missing,
                        unparsed_allowance=allowance,
                        tokens_in=estimate_message_tokens(messages),
                    )
                )
    return JudgePlan(
        judge=judge,
        template=template.name,
        template_hash=template.hash,
        dataset=dataset,
        prompts=tuple(prompts),
        models=tuple(models),
        samples_per_order=samples_per_order,
        multi_sample=multi_sample,
        batch=batch,
        requests=tuple(requests),
        expected_output_tokens=template.expected_output_tokens,
        price=price,
        done_samples=done,
        pending_samples=pending,
        given_up=tuple(given_up),
        unjudgeable=tuple(unjudgeable),
    )


def plan_missing(
    con: duckdb.DuckDBPyConnection,
    judge: str,
    template: Template,
    inputs: JudgeInputs,
    *,
    samples_per_order: int,
    max_unparsed: int | None,
    multi_sample: bool,
    batch: bool,
    price: Price | None,
) -> JudgePlan:
    """`build_plan` on `inputs` against what the warehouse holds for `judge` + `template`."""
    return build_plan(
        judge=judge,
        template=template,
        dataset=inputs.dataset,
        prompts=inputs.prompts,
        models=inputs.models,
        responses=inputs.responses,
        held=cell_states(con, judge, template.hash, inputs.dataset),
        samples_per_order=samples_per_order,
        max_unparsed=max_unparsed,
        multi_sample=multi_sample,
        batch=batch,
        price=price,
    )
