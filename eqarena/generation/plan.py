"""The generate plan: which prompts still lack an answer of the model, and what asking for them costs.

Wanted: the first `prompts` prompts of the dataset in natural order (as the judge chooses them). The
plan is that minus the prompts the warehouse holds an answer of the model id to, and minus those open
Batch API jobs are asking for (pending), so a re-run after a kill, a cap or failures asks only for
what is missing. A prompt without text (imported judgments carry
prompt ids only) cannot be answered: it is counted, never asked. Output tokens are estimated at
`max_tokens` per answer, so the estimated cost is an upper bound (at the batch price with `batch`).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from eqarena.judge.inputs import PlanError, choose_prompts, read_prompt_texts
from eqarena.llm.pricing import Price, estimate_message_tokens
from eqarena.warehouse.generate_batches import pending_prompts
from eqarena.warehouse.responses import answered_prompts


def answer_messages(prompt: str) -> list[dict[str, str]]:
    """The chat a model is asked: the prompt as the only user message, no system prompt (as arena-hard-auto)."""
    return [{"role": "user", "content": prompt}]


@dataclass(frozen=True)
class AnswerRequest:
    """One prompt to answer, with its estimated prompt tokens."""

    prompt_id: str
    tokens_in: int


@dataclass(frozen=True)
class AnswerPlan:
    """Everything a generate run will ask for, and its estimated size and cost."""

    model_id: str
    generator: str
    dataset: str
    prompts: dict[str, str]  # the chosen prompts' texts, in plan order
    requests: tuple[AnswerRequest, ...]
    answered: int
    unanswerable: int
    max_tokens: int
    price: Price | None
    pending: int = 0  # prompts open batch jobs are asking for
    batch: bool = False

    @property
    def tokens_in(self) -> int:
        return sum(r.tokens_in for r in self.requests)

    @property
    def tokens_out(self) -> int:
        return len(self.requests) * self.max_tokens

    @property
    def cost_usd(self) -> float | None:
        """Estimated cost at most (every answer `max_tokens` long); None without a price."""
        return None if self.price is None else self.price.cost(self.tokens_in, self.tokens_out, batch=self.batch)

    def chunks(self, size: int) -> list[tuple[AnswerRequest, ...]]:
        """The requests in groups of `size`, in plan order."""
        return [self.requests[k : k + size] for k in range(0, len(self.requests), size)]

    def summary(self) -> AnswerPlanSummary:
        """The numbers `eqarena generate --plan` prints."""
        return AnswerPlanSummary(
            model=self.model_id,
            generator=self.generator,
            dataset=self.dataset,
            prompts=len(self.prompts),
            answered=self.answered,
            pending=self.pending,
            calls=len(self.requests),
            unanswerable=self.unanswerable,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            max_tokens=self.max_tokens,
            cost_usd=None if self.cost_usd is None else round(self.cost_usd, 6),
            batch=self.batch,
        )


@dataclass(frozen=True)
class AnswerPlanSummary:
    """A generate plan in numbers: the chosen prompts, how many the model has answered, and what the
    missing `calls` cost at most in tokens and USD (None: no price; at the batch price with `batch`);
    `pending` prompts are in open batch jobs."""

    model: str
    generator: str
    dataset: str
    prompts: int
    answered: int
    pending: int
    calls: int
    unanswerable: int
    tokens_in: int
    tokens_out: int
    max_tokens: int
    cost_usd: float | None
    batch: bool = False

    def line(self) -> str:
        """'generate plan for M (openai:M) on D: 50 calls, ~210,000 tokens at most, ~$1.23 at most'."""
        cost = "cost unknown (no price for this model)" if self.cost_usd is None else f"~${self.cost_usd:.2f} at most"
        return (
            f"generate plan for {self.model} ({self.generator}) on {self.dataset}: {self.calls:,} calls, "
            f"~{self.tokens_in + self.tokens_out:,} tokens at most, {cost}"
        )

    def lines(self) -> list[str]:
        """What the plan covers, then what its missing calls cost."""
        cost = "unknown (no price; see --prices)" if self.cost_usd is None else f"${self.cost_usd:,.4f} at most"
        if self.batch and self.cost_usd is not None:
            cost += " (batch price)"
        skipped = f", {self.unanswerable:,} without text skipped" if self.unanswerable else ""
        pending = f", {self.pending:,} pending in open batch jobs" if self.pending else ""
        return [
            f"{self.model} ({self.generator}) on {self.dataset}: {self.answered:,} of {self.prompts:,} prompts "
            f"answered{pending}{skipped}",
            f"plan: {self.calls:,} calls, ~{self.tokens_in:,} input + at most {self.tokens_out:,} output tokens "
            f"({self.max_tokens:,} per answer), {cost}",
        ]


def plan_answers(
    con: duckdb.DuckDBPyConnection,
    *,
    dataset: str,
    model_id: str,
    generator: str,
    prompt_count: int | None,
    max_tokens: int,
    price: Price | None,
    batch: bool = False,
) -> AnswerPlan:
    """The prompts of `dataset` still without an answer of `model_id`, nor pending in a batch job (module
    docstring)."""
    texts = read_prompt_texts(con, dataset)
    chosen = {p: texts[p] for p in choose_prompts(list(texts), prompt_count)}
    answerable = {p: t for p, t in chosen.items() if t.strip()}
    if not answerable:
        raise PlanError(
            f"dataset {dataset!r}: its prompts have no text (imported judgments or scores carry "
            "prompt ids only), so there is nothing to answer"
        )
    done = answered_prompts(con, dataset, model_id)
    pending = pending_prompts(con, dataset, model_id) - done
    requests = tuple(
        AnswerRequest(p, estimate_message_tokens(answer_messages(t)))
        for p, t in answerable.items()
        if p not in done and p not in pending
    )
    return AnswerPlan(
        model_id=model_id,
        generator=generator,
        dataset=dataset,
        prompts=chosen,
        requests=requests,
        answered=sum(p in done for p in chosen),
        unanswerable=len(chosen) - len(answerable),
        max_tokens=max_tokens,
        price=price,
        pending=sum(p in pending for p in answerable),
        batch=batch,
    )
