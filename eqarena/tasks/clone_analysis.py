"""Tasks of the adversarial clone-robustness analysis (paper Section 4.2, App. F.5): run the
experiment on a rate run's game and write its outcomes as polars frames."""

from __future__ import annotations

import numpy as np
import polars as pl

from eqarena.exceptions import NotFoundError
from eqarena.options import CloneOptions
from eqarena.orchestration.steps import step
from eqarena.solvers.analyses.clones import (
    CloneOutcome,
    clone_experiment,
    clone_prompt_ids,
    clone_verdicts,
    sample_clone_sources,
)
from eqarena.warehouse.analyses import RunGame


@step("run_clone_experiment")
def run_clone_experiment(game: RunGame, settings: CloneOptions) -> list[CloneOutcome]:
    """Every method's model ranks on the game with 0..n adversarial copies, exact and noisy."""
    if settings.target not in game.models:
        raise NotFoundError(
            f"--target {settings.target!r} is not a model of rate run {game.run_id} (models: {', '.join(game.models)})"
        )
    return clone_experiment(
        game.u_king,
        game.models.index(settings.target),
        ns_exact=settings.ns_exact,
        ns_noisy=settings.ns_noisy,
        lam=settings.lam,
        noise=settings.noise,
        seed=settings.seed,
        methods=settings.methods,
    )


def clone_frames(game: RunGame, settings: CloneOptions, outcomes: list[CloneOutcome]) -> dict[str, pl.DataFrame]:
    """The rows of clone_robustness, clone_prompts and clone_verdicts (without run_id)."""
    m = len(game.models)
    robustness = pl.DataFrame(
        {
            "variant": [o.variant for o in outcomes for _ in range(m)],
            "n_clones": [o.n_clones for o in outcomes for _ in range(m)],
            "method": [o.method for o in outcomes for _ in range(m)],
            "model_id": list(game.models) * len(outcomes),
            "rank": np.concatenate([o.ranks for o in outcomes]).astype(np.int32),
            "rating": np.concatenate([o.ratings for o in outcomes]),
            "exploitability": [o.exploitability for o in outcomes for _ in range(m)],
        },
        schema_overrides={"exploitability": pl.Float64},
    ).with_columns(
        source_run_id=pl.lit(game.run_id),
        target=pl.lit(settings.target),
        adversary_lambda=pl.lit(settings.lam),
        seed=pl.lit(settings.seed, dtype=pl.Int32),
    )
    n_max = max([0, *settings.ns_exact, *settings.ns_noisy])
    sources = sample_clone_sources(game.u_king, game.models.index(settings.target), n_max, settings.lam, settings.seed)
    copies = pl.DataFrame(
        {
            "draw": np.arange(1, n_max + 1, dtype=np.int32),
            "prompt_id": clone_prompt_ids(game.prompts, sources),
            "source_prompt_id": [game.prompts[k] for k in sources],
        },
        schema_overrides={"prompt_id": pl.String, "source_prompt_id": pl.String},
    )
    verdicts = clone_verdicts(outcomes, game.models.index(settings.target), game.models)
    return {
        "clone_robustness": robustness,
        "clone_prompts": copies,
        "clone_verdicts": pl.DataFrame({"method": list(verdicts), "verdict": list(verdicts.values())}),
    }
