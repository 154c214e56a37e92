"""The rating-method registry: one table that the command line, the rate flow, the bootstrap, the
report and the clone analysis read. A toy method added in a test (one registry entry plus its solver
function) must appear in all of them with no other edit."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import query
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.methods import (
    ModelFit,
    RatingMethod,
    get_method,
    method_names,
    parse_methods,
    register,
    registered,
    tensor_methods,
    unregister,
)
from eqarena.solvers import synthetic_king_tensor
from eqarena.solvers.analyses.clones import clone_experiment
from eqarena.solvers.cce.max_entropy import cce
from eqarena.solvers.games.equilibrium import king_ratings

pytestmark = pytest.mark.unit


def mean_payoff(u_king, battles, bootstrap, seed) -> ModelFit:
    """Toy model-rating method: each model's mean payoff as king over prompts and rebels."""
    return ModelFit(np.asarray(u_king).mean(axis=(0, 2)))


def uniform_cce(game, target):
    """Toy equilibrium method: the maximum-entropy CCE, whatever target it is given."""
    return cce(game, target="uniform")


TOYS = (
    RatingMethod("mean", "Mean payoff", "#17becf", "mean payoff as king (toy)", "mean", fit=mean_payoff),
    RatingMethod("cce-toy", "CCE toy", "#bcbd22", "maximum-entropy CCE (toy)", "cce", "toy", solve=uniform_cce),
)


@pytest.fixture
def toys():
    for method in TOYS:
        register(method)
    try:
        yield [m.name for m in TOYS]
    finally:
        for method in TOYS:
            unregister(method.name)


def test_the_built_in_methods_in_order():
    assert method_names() == ("bt", "ne", "cce", "ne-shannon", "cce-shannon", "deviation", "winrate", "bt-style")
    assert method_names(default_only=True) == ("bt", "ne", "cce", "ne-shannon", "cce-shannon")
    assert [m.is_equilibrium for m in registered()] == [False, True, True, True, True, True, False, False]
    assert tensor_methods(method_names()) == ("bt", "ne", "cce", "ne-shannon", "cce-shannon", "deviation")
    assert (get_method("ne").concept, get_method("ne").target) == ("nash", "affinity")
    assert parse_methods("cce-shannon, BT") == ("bt", "cce-shannon")  # registry order, case folded
    assert parse_methods(None) == method_names(default_only=True)


def test_unknown_and_malformed_methods_are_refused():
    with pytest.raises(ValueError, match=r"--methods: unknown method elo \(choose from bt, ne, cce, "):
        parse_methods("ne,elo")
    with pytest.raises(ValueError, match="give at least one"):
        parse_methods(" , ")
    with pytest.raises(ValueError, match="exactly one of solve"):
        RatingMethod("both", "B", "#000000", "", "x", fit=mean_payoff, solve=uniform_cce)
    with pytest.raises(ValueError, match="is registered already"):
        register(RatingMethod("ne", "NE", "#000000", "", "nash", "affinity", solve=uniform_cce))


def test_a_registered_method_is_a_choice_and_leaves_again(toys):
    assert parse_methods("mean,ne,cce-toy") == ("ne", "mean", "cce-toy")
    assert method_names()[-2:] == ("mean", "cce-toy")
    u = synthetic_king_tensor(12, 4, seed=3)
    ratings, exploitability = king_ratings(get_method("mean"), u)
    np.testing.assert_allclose(ratings, u.mean(axis=(0, 2)))
    assert exploitability is None
    ratings, exploitability = king_ratings(get_method("cce-toy"), u)
    np.testing.assert_allclose(ratings, king_ratings(get_method("cce-shannon"), u)[0], atol=1e-9)
    assert exploitability <= 1e-6


def test_the_clone_experiment_rates_every_registered_method(toys):
    u = synthetic_king_tensor(20, 4, seed=5)
    outcomes = clone_experiment(u, 0, ns_exact=(0, 30), ns_noisy=(0,), methods=["bt", *toys])
    assert {o.method for o in outcomes} == {"bt", "mean", "cce-toy"}
    mean = {o.n_clones: o.ratings for o in outcomes if o.method == "mean" and o.variant == "exact"}
    assert not np.allclose(mean[0], mean[30])  # the mean counts the copies


def test_a_toy_method_runs_through_rate_report_and_clones(toys, prefect_harness, tmp_path):
    db, out = str(tmp_path / "w.duckdb"), tmp_path / "out"
    cli = CliRunner()
    assert "mean" in cli.invoke(app, ["methods"]).stdout
    ingested = cli.invoke(app, ["ingest", "--db", db])
    assert ingested.exit_code == 0, ingested.output
    rated = cli.invoke(
        app, ["rate", "--methods", "ne,mean,cce-toy", "--judge", "prd:gpt4", "--bootstrap", "4", "--db", db]
    )
    assert rated.exit_code == 0, rated.output
    shown = " ".join(rated.stdout.split())
    assert "ranks by Mean payoff / CCE toy" in shown  # the console table's caption names their columns
    run_id = re.search(r"run (rate-\S+) written", rated.stdout).group(1)

    methods = {m for (m,) in query(db, "SELECT DISTINCT method FROM ratings WHERE run_id = ?", [run_id])}
    assert methods == {"ne", "mean", "cce-toy"}
    assert query(db, "SELECT count(*) FROM ratings WHERE run_id = ? AND method = 'mean'", [run_id]) == [(5,)]
    assert query(
        db, "SELECT solution_concept, target FROM equilibria WHERE run_id = ? AND method = 'cce-toy'", [run_id]
    ) == [("cce", "toy")]
    assert query(
        db, "SELECT count(DISTINCT scheme) FROM rating_intervals WHERE run_id = ? AND method = 'cce-toy'", [run_id]
    ) == [(2,)]

    reported = cli.invoke(app, ["report", "--run", run_id, "--out", str(out), "--db", db])
    assert reported.exit_code == 0, reported.output
    html = (out / f"eqarena-{run_id}.html").read_text(encoding="utf-8")
    ratings_section = html.split('<section id="model-ratings" class="folded">')[1].split("</section>")[0]
    assert "mean rank" in ratings_section and "cce-toy rank" in ratings_section
    support_section = html.split('<section id="support">')[1].split("</table>")[0]  # its table
    assert "cce-toy" in support_section and "mean" not in support_section  # no equilibrium, no support

    cloned = cli.invoke(
        app, ["analyze", "clones", "--run", run_id, "--n", "0,20", "--n-noisy", "0", "--db", db, "--out", str(out)]
    )
    assert cloned.exit_code == 0, cloned.output
    assert "Mean payoff: exact:" in cloned.stdout and "CCE toy: exact:" in cloned.stdout
    assert {m for (m,) in query(db, "SELECT DISTINCT method FROM clone_robustness")} == {"ne", "mean", "cce-toy"}


def test_ratings_that_round_to_zero_print_as_zero():
    from eqarena.methods import format_rating

    assert [format_rating("ne", r) for r in (-4.2e-13, 2.7e-12, -0.0004, -0.5594)] == [
        "+0.000",
        "+0.000",
        "+0.000",
        "-0.559",
    ]
    assert [format_rating("bt", r) for r in (1034.4, -0.3)] == ["1034", "0"]
