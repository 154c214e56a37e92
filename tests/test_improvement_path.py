"""The simulated improvement path (paper Section 2, Algorithm 1): its invariants, the paper's contrast
(Elo narrows the models' skills more than NE ratings do) and `eqarena simulate improvement-path`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.report.simulation_figures import path_heatmaps
from eqarena.solvers.analyses.improvement_path import TIE, PathSizes, Rater, improvement_path, rater, skill_entropy
from eqarena.solvers.analyses.improvement_summary import bootstrap_mean, paired_difference
from eqarena.warehouse.simulations import read_simulation_steps
from tests.conftest import query

SMALL = PathSizes(skills=3, initial_prompts=3, initial_models=3, candidate_models=4, candidate_prompts=16, iterations=4)


def spy(rate: Rater) -> tuple[Rater, list]:
    """`rate` recording every model rating call as (number of models, ratings, models)."""
    calls = []

    def model_ratings(prompts, models):
        r = np.asarray(rate.model_ratings(prompts, models))
        calls.append((len(models), r, models.copy()))
        return r

    return replace(rate, model_ratings=model_ratings), calls


@pytest.mark.parametrize("method", ["elo", "ne"])
@pytest.mark.parametrize("setting", ["initial", "additional"])
def test_algorithm_1_invariants(method, setting):
    rate, calls = spy(rater(method))
    steps = improvement_path(rate, setting, SMALL, seed=3)
    assert [s.iteration for s in steps] == list(range(SMALL.iterations + 1))
    m = SMALL.candidate_models
    call = 0
    for t, step in enumerate(steps[1:], start=1):
        model = step.added_model
        assert np.all(model >= 0)
        # a sum of `rounds` Dirichlet improvement vectors, each summing to 1
        assert model.sum() == pytest.approx(step.rounds)
        if setting == "additional":
            assert np.all(step.added_prompt >= 0) and step.added_prompt.sum() == pytest.approx(1.0)
        else:
            assert step.added_prompt is None
        # the model is added in the round whose best candidate is top-ranked of all models
        call += step.rounds
        size, ratings, models = calls[call - 1]
        assert size == m + SMALL.initial_models + t - 1
        best = int(np.argmax(ratings[:m]))
        assert np.array_equal(models[best], model)
        assert ratings[best] >= ratings.max() - TIE
        assert step.top_ranked
        # earlier rounds of the same model stopped for a reason: their best candidate was not top
        for _, earlier, _ in calls[call - step.rounds : call - 1]:
            assert earlier[:m].max() < earlier.max() - TIE
    if method == "ne":
        marginal = steps[-1].prompt_marginal
        prompts = SMALL.initial_prompts + (SMALL.iterations if setting == "additional" else 0)
        assert marginal.shape == (prompts,) and marginal.sum() == pytest.approx(1.0) and np.all(marginal >= -1e-12)
        # Figure 4 right: the prompts' skills weighted by the equilibrium; prompts lie on the simplex
        rng = np.random.default_rng(3)
        initial = rng.dirichlet(np.ones(SMALL.skills), SMALL.initial_prompts)
        np.testing.assert_allclose(steps[0].equilibrium_prompt_skills, steps[0].prompt_marginal @ initial, rtol=1e-12)
        for step in steps:
            assert step.equilibrium_prompt_skills.shape == (SMALL.skills,)
            assert step.equilibrium_prompt_skills.sum() == pytest.approx(1.0)
    else:
        assert steps[-1].prompt_marginal is None and steps[-1].equilibrium_prompt_skills is None


def test_seeded_runs_are_reproducible():
    first, again = (improvement_path(rater("elo"), "additional", SMALL, seed=7) for _ in range(2))
    other = improvement_path(rater("elo"), "additional", SMALL, seed=8)
    for a, b in zip(first[1:], again[1:]):
        assert np.array_equal(a.added_model, b.added_model) and np.array_equal(a.added_prompt, b.added_prompt)
        assert a.model_entropy == b.model_entropy
    assert not np.array_equal(first[-1].added_model, other[-1].added_model)


def test_skill_entropy_normalises_the_mean():
    assert skill_entropy(np.array([[2.0, 0.0], [0.0, 2.0]])) == pytest.approx(np.log(2))
    assert skill_entropy(np.array([[3.0, 0.0], [1.0, 0.0]])) == pytest.approx(0.0)


def test_bootstrap_intervals_cover_the_mean_and_pair_trials():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    i = bootstrap_mean(x)
    assert i.lo < i.mean == 2.5 < i.hi
    d = paired_difference(x, x + 1.0)  # a constant paired shift has no spread
    assert d.mean == d.lo == d.hi == pytest.approx(-1.0)


# Few trials and iterations: K = 3 skills, 6 trials x 8 iterations. Seeds 0, 100 and 200 all give
# elo a lower mean final model skill entropy than ne (see CONTRAST_SEEDS), in both settings.
CONTRAST = PathSizes(
    skills=3, initial_prompts=3, initial_models=3, candidate_models=8, candidate_prompts=64, iterations=8
)


@pytest.mark.parametrize("setting", ["initial", "additional"])
def test_elo_narrows_model_skills_more_than_ne(setting):
    final = {
        m: [improvement_path(rater(m), setting, CONTRAST, seed=k)[-1].model_entropy for k in range(6)]
        for m in ("elo", "ne")
    }
    assert np.mean(final["elo"]) < np.mean(final["ne"])


def test_cli_writes_tables_and_page(tmp_path):
    db, out = tmp_path / "sim.duckdb", tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "improvement-path",
            "--trials",
            "2",
            "--iterations",
            "3",
            "--workers",
            "1",
            "--db",
            str(db),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "elo − ne" in result.output and "under elo the model skill entropy ends" in result.output
    ((run_id, kind, parameters),) = query(db, "SELECT run_id, kind, parameters FROM simulation_runs")
    assert kind == "improvement-path" and '"trials": 2' in parameters
    assert query(db, "SELECT kind, status FROM runs WHERE run_id = ?", [run_id]) == [("simulate", "ok")]
    counts = query(
        db,
        "SELECT method, setting, count(*), count(added_model), count(added_prompt), "
        "count(prompt_marginal), count(equilibrium_prompt_skills) FROM simulation_steps GROUP BY ALL ORDER BY ALL",
    )
    assert counts == [
        ("elo", "additional", 8, 6, 6, 0, 0),
        ("elo", "initial", 8, 6, 0, 0, 0),
        ("ne", "additional", 8, 6, 6, 8, 8),
        ("ne", "initial", 8, 6, 0, 8, 8),
    ]
    (page,) = out.glob("improvement-path-*.html")
    html = page.read_text()
    assert run_id in html and html.count("data:image/png;base64,") == 3
    with warehouse.connect(str(db), read_only=True) as con:
        frame = read_simulation_steps(con, run_id)
    titles = {
        m: [ax.get_title() for ax in path_heatmaps(frame, m, "additional", 0).axes if ax.get_title()]
        for m in ("ne", "elo")
    }
    assert titles["ne"] == [
        "added prompts",
        "prompt-player equilibrium",
        "equilibrium-weighted prompt skills",
        "added models",
    ]
    assert titles["elo"] == ["added prompts", "added models"]
