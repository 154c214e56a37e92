"""Assembling the payoff tensor u_king[P, M, M] from stored judgments (docs/game.md#the-payoff-tensor).

u_king(p, i, j) = 1/2 [ s(p, i as A, j as B) - s(p, j as A, i as B) ]: the mean over the two
orders, with equal weight whatever each order's sample count, of the mean ok-score from i's point
of view in that order. With several judges, each judge's mean in an order counts equally.
Antisymmetric by construction. A cell is covered when both orders have at least one ok judgment;
uncovered cells are NaN in `u_king` and False in `covered`, never zero.

With `orders="any"` (battle logs, whose positions the platform randomised, so no cell needs
balancing) a cell judged in one order only is covered too, with that order's mean as u_king.

A score judge (table `scores`, `eqarena import scores`) counts as a judge whose one sample in each
order is the payoff of the two models' scores (importers/scores.py): the pairs are derived here, in
NumPy from a (P, M) score matrix, never stored or read pair by pair.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import duckdb
import numpy as np
import psutil

from eqarena.exceptions import EqarenaError, OptionError
from eqarena.options import MissingPolicy, OrderRule, choice
from eqarena.warehouse.catalog import has_scores
from eqarena.warehouse.prompt_groups import PromptGroup

DROP_POLICIES = (MissingPolicy.REFUSE, MissingPolicy.DROP_PROMPTS, MissingPolicy.DROP_MODELS)


class IncompleteTensorError(EqarenaError, ValueError):
    """The judgments leave (prompt, model pair) cells uncovered and no drop policy was given."""


class TensorTooLargeError(EqarenaError, MemoryError):
    """The dense tensor of the judged prompts and models would not fit in the memory there is."""


ASSEMBLY_BYTES_PER_CELL = 28  # per (prompt, model, model) cell: order sums 8, judge counts 4, samples 8, u_king 8


def refuse_oversized_tensor(prompts: int, models: int, memory_bytes: int) -> None:
    """TensorTooLargeError when assembling a (prompts, models, models) tensor alone needs more than
    `memory_bytes` (solving it needs several times that again)."""
    needed = prompts * models * models * ASSEMBLY_BYTES_PER_CELL
    if needed > memory_bytes:
        raise TensorTooLargeError(
            f"the payoff tensor of {prompts:,} prompts x {models:,} models needs {needed / 2**30:,.1f} GiB to "
            f"assemble, more than the {memory_bytes / 2**30:,.1f} GiB of memory available; rate a category of the "
            f"prompts (--category) or a dataset of fewer models"
        )


class UnknownJudgeError(EqarenaError, LookupError):
    """A requested judge has no judgment on the dataset."""


@dataclass(frozen=True, eq=False)
class PayoffTensor:
    """u_king[P, M, M] with its coverage mask and labels.

    `u_king` is NaN where `covered` is False; the diagonal is 0 and covered. `samples[p, i, j]` counts
    the ok judgments with model i shown as assistant A and j as B on prompt p. `imputed` (or None) marks
    cells filled by `--missing impute` (covered, with 0 samples).
    """

    dataset: str
    judges: tuple[str, ...]
    prompts: tuple[str, ...]
    models: tuple[str, ...]
    u_king: np.ndarray
    covered: np.ndarray
    samples: np.ndarray
    fingerprint: str
    inputs: tuple[tuple[str, str, int], ...] = ()  # (judge, status, judgment rows read)
    imputed: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.u_king.shape

    @property
    def missing_pairs(self) -> np.ndarray:
        """(P, M, M) bool: uncovered cells above the diagonal (each unordered pair once)."""
        return ~self.covered & np.triu(np.ones(self.covered.shape[1:], dtype=bool), k=1)[None]

    @property
    def complete(self) -> bool:
        return bool(self.covered.all())

    def pair_coverage(self) -> np.ndarray:
        """(M, M) number of prompts on which the ordered pair (i, j) is covered."""
        return self.covered.sum(axis=0)

    def take(self, prompt_index: np.ndarray, model_index: np.ndarray) -> PayoffTensor:
        """The sub-tensor on the given prompt and model indices (in that order)."""
        p, m = np.asarray(prompt_index, dtype=int), np.asarray(model_index, dtype=int)
        sub = np.ix_(p, m, m)
        return replace(
            self,
            prompts=tuple(self.prompts[k] for k in p),
            models=tuple(self.models[k] for k in m),
            u_king=self.u_king[sub],
            covered=self.covered[sub],
            samples=self.samples[sub],
            imputed=None if self.imputed is None else self.imputed[sub],
        )


@dataclass(frozen=True)
class Dropped:
    """What a missing-data policy removed: (name, uncovered unordered-pair cells it was part of), or
    for `impute`, how many of the (prompt, unordered pair) cells it filled."""

    policy: str
    prompts: tuple[tuple[str, int], ...] = ()
    models: tuple[tuple[str, int], ...] = ()
    imputed_cells: int = 0
    total_cells: int = 0
    missing_cells: int = 0  # "judged-only": the unjudged cells, left empty (the run stores the judged ones)

    def summary(self) -> str:
        if self.policy == "judged-only":
            if not self.missing_cells:
                return "nothing dropped (the tensor is complete)"
            judged = self.total_cells - self.missing_cells
            return (
                f"{judged:,} of {self.total_cells:,} (prompt, model pair) cells judged "
                f"({judged / max(self.total_cells, 1):.1%}); the methods chosen rate from the judged battles "
                "alone, so the others stay empty (none imputed, none dropped)"
            )
        if self.policy == "groups":
            return (
                f"prompt groups: {self.imputed_cells:,} of {self.total_cells:,} (group, model pair) cells "
                f"({self.imputed_cells / max(self.total_cells, 1):.1%}) rest on the Bradley-Terry smoothing alone "
                f"(no battle of the group compared the pair)"
            )
        if self.imputed_cells:
            return (
                f"--missing impute filled {self.imputed_cells:,} of {self.total_cells:,} (prompt, model pair) "
                f"cells ({self.imputed_cells / self.total_cells:.1%}) with prompt-wise Bradley-Terry predictions"
            )
        if not self.prompts and not self.models:
            return "nothing dropped (the tensor is complete)"
        parts = []
        if self.prompts:
            parts.append(f"{len(self.prompts)} prompt(s): " + _listing([n for n, _ in self.prompts]))
        if self.models:
            parts.append(f"{len(self.models)} model(s): " + _listing([n for n, _ in self.models]))
        return f"--missing {self.policy} dropped " + "; ".join(parts)


def _listing(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... (+{len(names) - limit} more)" if len(names) > limit else "")


def _natural_key(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def _index_table(column: str) -> str:
    """SQL for a (column, k) table from the list parameter $column: k is the 0-based position."""
    return f"SELECT unnest(${column}::VARCHAR[]) AS {column}, unnest(range(len(${column}::VARCHAR[]))) AS k"


def _judge_filter(template_hash: str | None) -> str:
    return " AND template_hash = $template_hash" if template_hash is not None else ""


def available_judges(con: duckdb.DuckDBPyConnection, dataset: str) -> list[str]:
    """Judges with at least one judgment or score on `dataset`, sorted."""
    scores = " UNION SELECT DISTINCT judge FROM scores WHERE dataset = $dataset" if has_scores(con) else ""
    rows = con.execute(
        f"SELECT DISTINCT judge FROM judgments WHERE dataset = $dataset{scores} ORDER BY judge", {"dataset": dataset}
    ).fetchall()
    return [r[0] for r in rows]


def score_judges(con: duckdb.DuckDBPyConnection, dataset: str) -> set[str]:
    """Judges with scores (table `scores`) on `dataset`."""
    if not has_scores(con):
        return set()
    return {r[0] for r in con.execute("SELECT DISTINCT judge FROM scores WHERE dataset = ?", [dataset]).fetchall()}


def assemble_tensor(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    judges: list[str] | tuple[str, ...],
    *,
    template_hash: str | None = None,
    orders: OrderRule = OrderRule.BOTH,
    group: PromptGroup | None = None,
    memory_bytes: int | None = None,
) -> PayoffTensor:
    """Position-balanced u_king[P, M, M] and coverage mask for one judge or a pooled set.

    `orders`: "both" (a cell needs ok judgments in both orders) or "any" (module docstring).

    The prompts are those of `dataset` (table prompts) plus any judged prompt; the models those with a
    response on it plus any judged model, so a model nobody judged shows up as uncovered. With `group`,
    only the prompts of that category or cluster (table prompts), and the models with a response or a
    judgment on them; the group is part of the fingerprint.
    Raises UnknownJudgeError naming the judge when a requested judge has no judgment on the dataset,
    TensorTooLargeError before allocating a tensor that needs more than `memory_bytes` (default: the
    memory available now) to assemble.
    """
    judges = tuple(dict.fromkeys(judges))
    if not judges:
        raise OptionError("at least one judge is required")
    orders = choice(OrderRule, orders, "orders")
    present = set(available_judges(con, dataset))
    absent = [j for j in judges if j not in present]
    if absent:
        have = ", ".join(sorted(present)) or "none"
        raise UnknownJudgeError(
            f"no judgments by judge {', '.join(absent)} on dataset {dataset!r} (judges present: {have})"
        )
    params = {"dataset": dataset, "judges": list(judges)}
    if template_hash is not None:
        params["template_hash"] = template_hash
    in_group = ""
    if group is not None:
        params["group_name"] = group.name
        in_group = f" AND {group.sql()}"
    where = f"dataset = $dataset AND list_contains($judges, judge){_judge_filter(template_hash)}{in_group}"

    scored = has_scores(con)
    score_where = where
    prompt_sql = (
        f"SELECT prompt_id FROM prompts WHERE dataset = $dataset{in_group} "
        f"UNION SELECT DISTINCT prompt_id FROM judgments WHERE {where}"
    )
    model_sql = (
        f"SELECT model_id FROM responses WHERE dataset = $dataset{in_group} "
        f"UNION SELECT model_a FROM judgments WHERE {where} UNION SELECT model_b FROM judgments WHERE {where}"
    )
    input_sql = (
        f"SELECT judge, status, hash(template_hash, prompt_id, model_a, model_b, sample_index, status, score) "
        f"AS h FROM judgments WHERE {where}"
    )
    if scored:
        prompt_sql += f" UNION SELECT DISTINCT prompt_id FROM scores WHERE {score_where}"
        model_sql += f" UNION SELECT DISTINCT model_id FROM scores WHERE {score_where}"
        input_sql += (
            f" UNION ALL SELECT judge, 'ok', hash(template_hash, prompt_id, model_id, score, payoff, scale) "
            f"FROM scores WHERE {score_where}"
        )
    prompt_names = sorted((r[0] for r in con.execute(prompt_sql, params).fetchall()), key=_natural_key)
    model_names = sorted((r[0] for r in con.execute(model_sql, params).fetchall()), key=_natural_key)

    inputs = con.execute(
        f"SELECT judge, status, count(*) AS n, bit_xor(h) AS h FROM ({input_sql}) "
        f"GROUP BY judge, status ORDER BY judge, status",
        params,
    ).fetchall()
    digest = hashlib.sha256()
    for judge, status, n, h in inputs:
        digest.update(f"{judge}|{status}|{n}|{h};".encode())
    digest.update(("|".join(prompt_names) + "#" + "|".join(model_names)).encode())
    if group is not None:  # a group's run is never taken for another's, nor for the dataset's
        digest.update(f"#{group.grouping}={group.name}".encode())

    indexed = {**params, "prompts": prompt_names, "models": model_names}
    P, M = len(prompt_names), len(model_names)
    refuse_oversized_tensor(P, M, psutil.virtual_memory().available if memory_bytes is None else memory_bytes)
    order_sum = np.zeros((P, M, M))  # per order: the sum over judges of each judge's mean score
    order_judges = np.zeros((P, M, M), dtype=np.int32)
    samples = np.zeros((P, M, M), dtype=np.int64)
    _add_pairwise_judges(con, where, indexed, order_sum, order_judges, samples)
    if scored:
        _add_score_judges(con, score_where, indexed, order_sum, order_judges, samples)
    with np.errstate(invalid="ignore", divide="ignore"):
        order_mean = np.where(order_judges > 0, order_sum / order_judges, np.nan)
    del order_sum, order_judges

    # i's view: s(i as A) in the first order, -s(j as A) in the second; equal weight per order.
    mirrored = np.swapaxes(order_mean, 1, 2)
    u_king = 0.5 * (order_mean - mirrored)
    if orders == "any":
        u_king = np.where(np.isnan(mirrored), order_mean, np.where(np.isnan(order_mean), -mirrored, u_king))
    diagonal = np.eye(M, dtype=bool)[None]
    covered = ~np.isnan(u_king) | diagonal
    u_king[:, np.arange(M), np.arange(M)] = 0.0
    return PayoffTensor(
        dataset=dataset,
        judges=judges,
        prompts=tuple(prompt_names),
        models=tuple(model_names),
        u_king=u_king,
        covered=covered,
        samples=samples,
        fingerprint=digest.hexdigest()[:16],
        inputs=tuple((j, s, int(n)) for j, s, n, _ in inputs),
    )


def _add_pairwise_judges(con, where: str, params: dict, order_sum, order_judges, samples) -> None:
    """Add each judge's mean ok-score per (prompt, A, B) from table judgments, aggregated by DuckDB."""
    cells = con.execute(
        f"""
        WITH p AS ({_index_table("prompts")}),
             m AS ({_index_table("models")}),
             per_judge AS (
                 SELECT judge, prompt_id, model_a, model_b, avg(score) AS s, count(*) AS n
                 FROM judgments WHERE {where} AND status = 'ok'
                 GROUP BY judge, prompt_id, model_a, model_b),
             per_order AS (
                 SELECT prompt_id, model_a, model_b, sum(s) AS s, count(*) AS judges, sum(n) AS n
                 FROM per_judge GROUP BY prompt_id, model_a, model_b)
        SELECT p.k AS pi, a.k AS ai, b.k AS bi, o.s, o.judges, o.n
        FROM per_order o
        JOIN p ON p.prompts = o.prompt_id
        JOIN m a ON a.models = o.model_a
        JOIN m b ON b.models = o.model_b
        """,
        params,
    ).fetchnumpy()
    index = tuple(np.asarray(cells[c], dtype=np.int64) for c in ("pi", "ai", "bi"))
    order_sum[index] += np.asarray(cells["s"], dtype=np.float64)
    order_judges[index] += np.asarray(cells["judges"], dtype=np.int32)
    samples[index] += np.asarray(cells["n"], dtype=np.int64)


def _add_score_judges(con, where: str, params: dict, order_sum, order_judges, samples) -> None:
    """Add each score judge's payoffs: one sample per order wherever both models have a score."""
    P, M = order_sum.shape[:2]
    rule_params = {k: v for k, v in params.items() if k not in ("prompts", "models")}
    rules = con.execute(
        f"SELECT DISTINCT judge, template_hash, payoff, scale FROM scores WHERE {where} ORDER BY ALL", rule_params
    ).fetchall()
    for judge, template, payoff, scale in rules:
        cells = con.execute(
            f"""
            WITH p AS ({_index_table("prompts")}), m AS ({_index_table("models")})
            SELECT p.k AS pi, m.k AS mi, s.score FROM scores s
            JOIN p ON p.prompts = s.prompt_id JOIN m ON m.models = s.model_id
            WHERE s.dataset = $dataset AND s.judge = $judge AND s.template_hash = $template
            """,
            {
                "prompts": params["prompts"],
                "models": params["models"],
                "dataset": params["dataset"],
                "judge": judge,
                "template": template,
            },
        ).fetchnumpy()
        table = np.full((P, M), np.nan)
        table[np.asarray(cells["pi"], dtype=np.int64), np.asarray(cells["mi"], dtype=np.int64)] = cells["score"]
        for p in range(P):  # one prompt at a time: (M, M) temporaries, not (P, M, M)
            payoff_pm = score_payoffs(table[p], payoff, scale)
            judged = ~np.isnan(payoff_pm)
            order_sum[p][judged] += payoff_pm[judged]
            order_judges[p] += judged
            samples[p] += judged


def score_payoffs(scores: np.ndarray, payoff: str, scale: float) -> np.ndarray:
    """(M, M) payoff of model i over model j from their scores (M,) (NaN: not scored); the rule of
    importers/scores.py: clip((s_i - s_j) / scale, -1, 1), or sign(s_i - s_j)."""
    gap = (scores[:, None] - scores[None, :]) / scale
    out = np.clip(gap, -1.0, 1.0) if payoff == "clip-diff" else np.sign(gap)
    np.fill_diagonal(out, np.nan)
    return out


def apply_missing_policy(
    tensor: PayoffTensor, policy: MissingPolicy = MissingPolicy.REFUSE
) -> tuple[PayoffTensor, Dropped]:
    """Return a complete tensor, or raise IncompleteTensorError naming what is missing.

    drop-prompts: remove every prompt with an uncovered cell. drop-models: remove models one at a time,
    always the one in most uncovered cells (ties: alphabetical), until the rest is complete.
    (`impute` fills cells with a model's predictions: tasks.assemble, not this function.)
    """
    if policy not in DROP_POLICIES:
        raise ValueError(f"policy must be one of {', '.join(DROP_POLICIES)}; got {policy!r}")
    P, M, _ = tensor.shape
    if P == 0 or M < 2:
        raise IncompleteTensorError(
            f"dataset {tensor.dataset!r} has {P} prompt(s) and {M} model(s) for judge(s) "
            f"{', '.join(tensor.judges)}: a game needs at least 1 prompt and 2 models"
        )
    missing = tensor.missing_pairs
    if not missing.any():
        return tensor, Dropped(policy)
    per_prompt = missing.sum(axis=(1, 2))
    per_model = missing.sum(axis=(0, 2)) + missing.sum(axis=(0, 1))
    if policy == "refuse":
        bad_prompts = [tensor.prompts[k] for k in np.flatnonzero(per_prompt)]
        bad_models = [tensor.models[k] for k in np.flatnonzero(per_model)]
        total = P * M * (M - 1) // 2
        one_order = int((missing & ((tensor.samples + np.swapaxes(tensor.samples, 1, 2)) > 0)).sum())
        orders_hint = (
            f"; {one_order} of the missing cells are judged in one order only, which --orders any counts "
            "(for battle logs, whose positions the platform randomised)"
            if one_order
            else ""
        )
        raise IncompleteTensorError(
            f"judgments of {', '.join(tensor.judges)} on {tensor.dataset!r} cover "
            f"{total - int(missing.sum())} of {total} (prompt, model pair) cells: "
            f"{int(missing.sum())} missing on {len(bad_prompts)} prompt(s) ({_listing(bad_prompts, 5)}) "
            f"involving {len(bad_models)} model(s) ({_listing(bad_models, 5)}); "
            f"judge the missing cells or pass --missing impute, drop-prompts or drop-models{orders_hint}"
        )
    if policy == "drop-prompts":
        keep = np.flatnonzero(per_prompt == 0)
        if keep.size == 0:
            raise IncompleteTensorError(
                f"--missing drop-prompts would drop all {P} prompts: every prompt has a missing cell"
            )
        gone = tuple((tensor.prompts[k], int(per_prompt[k])) for k in np.flatnonzero(per_prompt))
        return tensor.take(keep, np.arange(M)), Dropped(policy, prompts=gone)
    # drop-models, greedy.
    keep = list(range(M))
    gone: list[tuple[str, int]] = []
    while True:
        sub = missing[np.ix_(range(P), keep, keep)] | missing[np.ix_(range(P), keep, keep)].swapaxes(1, 2)
        counts = sub.sum(axis=(0, 2))
        if counts.max() == 0:
            break
        worst = min(range(len(keep)), key=lambda k: (-counts[k], tensor.models[keep[k]]))
        gone.append((tensor.models[keep[worst]], int(counts[worst])))
        del keep[worst]
        if len(keep) < 2:
            raise IncompleteTensorError(
                f"--missing drop-models would leave fewer than 2 models (dropped {_listing([n for n, _ in gone])})"
            )
    return tensor.take(np.arange(P), np.asarray(keep)), Dropped(policy, models=tuple(gone))


def read_battles(
    con: duckdb.DuckDBPyConnection, tensor: PayoffTensor, *, template_hash: str | None = None
) -> dict[str, np.ndarray]:
    """Every ok judgment behind `tensor` (its judges, prompts and models) as index arrays.

    Returns {'model_a': int[n], 'model_b': int[n], 'score': float[n], 'prompt': int[n]} with model
    indices into tensor.models and prompt indices into tensor.prompts; score is A's (+1 A wins).
    """
    params = {
        "dataset": tensor.dataset,
        "judges": list(tensor.judges),
        "prompts": list(tensor.prompts),
        "models": list(tensor.models),
    }
    if template_hash is not None:
        params["template_hash"] = template_hash
    out = con.execute(
        f"""
        WITH p AS ({_index_table("prompts")}),
             m AS ({_index_table("models")})
        SELECT p.k AS prompt, a.k AS model_a, b.k AS model_b, j.score AS score
        FROM judgments j
        JOIN p ON p.prompts = j.prompt_id
        JOIN m a ON a.models = j.model_a
        JOIN m b ON b.models = j.model_b
        WHERE j.dataset = $dataset AND list_contains($judges, j.judge) AND j.status = 'ok'
              {_judge_filter(template_hash)}
        ORDER BY prompt, model_a, model_b, j.judge, j.sample_index
        """,
        params,
    ).fetchnumpy()
    return {
        "prompt": np.asarray(out["prompt"], dtype=np.int64),
        "model_a": np.asarray(out["model_a"], dtype=np.int64),
        "model_b": np.asarray(out["model_b"], dtype=np.int64),
        "score": np.asarray(out["score"], dtype=np.float64),
    }
