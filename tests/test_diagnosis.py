"""Degenerate equilibria explained: the findings of report/diagnosis.py on hand-made rating tables, and
end to end on a star-shaped battle log and a baseline-only preference table, where the equilibria are
checked exact by an independent NumPy evaluation and the explanation must name the causes the
warehouse records (imputed cells, the prompt support, ties, disagreement with BT)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from conftest import query
from degenerate_data import BASELINE, HUB, baseline_preferences, star_battles
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.report.diagnosis import Evidence, diagnose

pytestmark = pytest.mark.unit

runner = CliRunner()


def _table(rows: list[tuple]) -> pl.DataFrame:
    """(method, model, rank, rating, mass, imputed_share) rows as read_rating_table returns them."""
    return pl.DataFrame(
        rows,
        schema={
            "method": pl.Utf8,
            "action": pl.Utf8,
            "rank": pl.Int64,
            "rating": pl.Float64,
            "mass": pl.Float64,
            "imputed_share": pl.Float64,
        },
        orient="row",
    )


def _evidence(table, support, prompt_mass=None, rebel_mass=None, payoffs=None, mean=None) -> Evidence:
    return Evidence("ne", table, support, prompt_mass or {}, rebel_mass or {}, payoffs or {}, mean or {}, {})


CLEAN = [
    ("ne", "a", 1, 0.0, 1.0, 0.0),
    ("ne", "b", 2, -0.4, 0.0, 0.0),
    ("ne", "c", 3, -0.7, 0.0, 0.0),
    ("bt", "a", 1, 1100.0, None, None),
    ("bt", "b", 2, 1000.0, None, None),
    ("bt", "c", 3, 900.0, None, None),
]


def test_a_clean_answer_has_no_findings():
    found = diagnose(_evidence(_table(CLEAN), {"ne": {"king": (1, 3), "prompt": (30, 80)}}))
    assert found.findings == () and found.advice is None and found.deciding == ()


def test_one_king_explains_a_tie_below_it_and_names_the_method_that_orders_the_tied():
    rows = (
        [("ne", "a", 1, 0.0, 1.0, 0.0)]
        + [("ne", m, 2, -1.0, 0.0, 0.0) for m in "bcd"]
        + [
            ("bt", "a", 1, 1200.0, None, None),
            ("bt", "b", 2, 1100.0, None, None),
            ("bt", "c", 3, 1000.0, None, None),
            ("bt", "d", 4, 900.0, None, None),
        ]
    )
    found = diagnose(
        _evidence(
            _table(rows),
            {"ne": {"king": (1, 4), "prompt": (22, 805)}},
            prompt_mass={"p1": 0.7, "p2": 0.3},
            rebel_mass={"b": 1.0},
            payoffs={("p1", "a", "b"): (1.0, False)},
        )
    )
    tie = next(f for f in found.findings if "3 models tie at -1.000" in f)
    assert "b, c and d" in tie and "one king, a (king support 1 of 4)" in tie and "22 prompts" in tie
    assert not any("rests on" in f for f in found.findings)  # 22 of 805 prompts is 2.7%, not under 2%
    assert "read BT" in found.advice
    assert [p.prompt_id for p in found.deciding] == ["p1", "p2"]
    assert found.deciding[0].payoffs == (("a", "b", 1.0, False),)


def test_a_small_prompt_support_and_imputed_ratings_are_named_with_their_numbers():
    rows = [("ne", "a", 1, 0.0, 1.0, 0.92), ("ne", "b", 2, -0.3, 0.0, 0.4), ("ne", "c", 3, -0.6, 0.0, 0.51)]
    found = diagnose(_evidence(_table(rows), {"ne": {"king": (1, 3), "prompt": (8, 1024)}}))
    assert any("rests on 8 of 1,024 prompts (0.8%)" in f for f in found.findings)
    imputed = next(f for f in found.findings if "imputed cells" in f)
    assert "2 of 3 NE ratings (the top model among them)" in imputed and "a 92%, c 51%" in imputed
    assert "b " not in imputed.split(":")[-1]


def test_a_model_ranked_far_apart_by_ne_and_bt_is_explained_from_its_mass_and_mean_payoff():
    models = [f"m{k}" for k in range(8)]
    ne = [("ne", "m7", 1, 0.0, 0.8, 0.0), ("ne", "m0", 1, 0.0, 0.2, 0.0)] + [
        ("ne", m, k + 2, -0.1 * (k + 1), 0.0, 0.0) for k, m in enumerate(models[1:7])
    ]
    bt = [("bt", m, 8 - k, 1000.0 + k, None, None) for k, m in enumerate(models)]
    mean = {m: -0.5 + 0.1 * k for k, m in enumerate(models)}
    found = diagnose(_evidence(_table(ne + bt), {"ne": {"king": (2, 8), "prompt": (10, 100)}}, mean=mean))
    assert any(f.startswith("m0 and m7 tie first") and "m7 80%, m0 20%" in f for f in found.findings)
    gap = next(f for f in found.findings if f.startswith("NE and BT disagree on m0"))
    assert "1st of 8 by NE, 8th by BT" in gap and "mass 20%" in gap
    assert "by mean payoff over all prompts and opponents (-0.500) it is 8th of 8, nearer its BT place" in gap


def test_an_ne_that_stopped_before_its_limit_says_how_well_the_selection_is_known():
    support = {"ne": {"king": (1, 3), "prompt": (30, 80)}}
    table = _table(CLEAN + [("cce", m, k + 1, -0.1 * k, None, 0.0) for k, m in enumerate("abc")])
    base = _evidence(table, support)
    stopped = replace(base, limits={"ne": ("trace_stopped", 0.357)})
    found = diagnose(stopped)
    [finding] = [f for f in found.findings if "stopped before the end of its branch" in f]
    assert "continuum of equilibria" in finding and "last moved by 0.36" in finding
    assert "read CCE" in found.advice
    unbounded = diagnose(replace(base, limits={"ne": ("max_lambda", None)}))
    assert any("no bound: it stopped before two estimates" in f for f in unbounded.findings)
    for how in ("isolated", "extrapolated"):
        reached = replace(base, limits={"ne": (how, 1e-9)})
        assert diagnose(reached).findings == ()


def test_a_model_rating_headline_is_not_diagnosed():
    found = diagnose(Evidence("bt", _table(CLEAN), {}, {}, {}, {}, {}, {}))
    assert found.findings == ()


def _stored_game(db, run_id):
    cells = query(db, "SELECT prompt_id, king, rebel, u_king, imputed FROM payoffs WHERE run_id = ?", [run_id])
    prompts = sorted({c[0] for c in cells})
    models = sorted({c[1] for c in cells})
    u = np.zeros((len(prompts), len(models), len(models)))
    pi, mi = {p: k for k, p in enumerate(prompts)}, {m: k for k, m in enumerate(models)}
    for p, i, j, v, _ in cells:
        u[pi[p], mi[i], mi[j]] = v
    mass = {
        (pl_, a): m
        for pl_, a, m in query(
            db, "SELECT player, action, mass FROM equilibrium_marginals WHERE run_id = ? AND method = 'ne'", [run_id]
        )
    }
    xs = [
        np.array([mass.get((player, a), 0.0) for a in actions])
        for player, actions in (("prompt", prompts), ("king", models), ("rebel", models))
    ]
    return prompts, models, u, xs


def _independent_exploitability(u, xs) -> float:
    """Sum over players of the best deviation gain, u_rebel = -u_king off the diagonal and -1 on it,
    u_prompt = |u_king| (paper Section 3.1), evaluated with einsum."""
    xp, xk, xr = xs
    v_prompt = np.einsum("pij,i,j->p", np.abs(u), xk, xr)
    v_king = np.einsum("pij,p,j->i", u, xp, xr)
    v_rebel = -np.einsum("pij,p,i->j", u, xp, xk) - xk
    return sum(float(v.max() - v @ x) for v, x in ((v_prompt, xp), (v_king, xk), (v_rebel, xr)))


def _rate(tmp_path, fmt: str, source, dataset: str):
    db = tmp_path / "w.duckdb"
    assert runner.invoke(app, ["import", fmt, str(source), "--db", str(db), "-d", dataset]).exit_code == 0
    rated = runner.invoke(app, ["rate", "--db", str(db), "-d", dataset, "--missing", "impute", "--bootstrap", "0"])
    assert rated.exit_code == 0, rated.output
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    return db, run_id, rated.output


def _facts(db, run_id):
    ne = {
        a: (rank, share, mass)
        for a, rank, share, mass in query(
            db,
            "SELECT action, rank, imputed_share, mass FROM ratings WHERE run_id = ? AND method = 'ne' "
            "AND player = 'king'",
            [run_id],
        )
    }
    bt = dict(
        query(db, "SELECT action, rank FROM ratings WHERE run_id = ? AND method = 'bt' AND player = 'king'", [run_id])
    )
    return ne, bt


def _assert_explained(output: str, db, run_id, judged_everywhere: str):
    prompts, models, u, xs = _stored_game(db, run_id)
    assert _independent_exploitability(u, xs) <= 1e-6  # the equilibrium is exact
    ne, bt = _facts(db, run_id)
    text = " ".join(output.split())
    assert "Read the NE with care" in text
    # Imputed cells: every model whose rating rests mostly on them is named with its share; the model
    # judged against every other is not among them.
    mostly = {m for m, (_, share, _) in ne.items() if share > 0.5}
    assert mostly and judged_everywhere not in mostly
    imputed = text[text.index("rest mostly on imputed cells") :]
    for m in sorted(mostly, key=lambda m: (-ne[m][1], ne[m][0], m))[:4]:
        assert f"{m} {ne[m][1]:.0%}" in imputed
    # The prompt support: named when under 2% of the prompts.
    support = int((xs[0] > 1e-6).sum())
    assert (f"rests on {support} of {len(prompts)} prompts" in text) == (support < 0.02 * len(prompts))
    # Ties at the top: named with their king masses.
    first = sorted(m for m, (rank, _, _) in ne.items() if rank == 1)
    assert (" and ".join(first) + " tie first:" in text) == (len(first) > 1)
    # The widest NE-vs-BT gap is explained when it reaches max(2, M/4) places.
    gap, model = max((abs(ne[m][0] - bt[m]), m) for m in ne)
    if gap >= max(2, -(-len(ne) // 4)):
        assert f"disagree on {model}:" in text
    # The deciding prompts are the support's, heaviest first.
    heaviest = prompts[int(np.argmax(xs[0]))]
    assert f"{heaviest} (mass {xs[0].max():.0%})" in text


@pytest.mark.integration
def test_a_star_shaped_battle_log_is_rated_exactly_and_its_odd_answer_explained(tmp_path):
    log = star_battles(tmp_path / "star.jsonl")
    db, run_id, output = _rate(tmp_path, "battles", log, "star")
    _assert_explained(output, db, run_id, judged_everywhere=HUB)
    ne, bt = _facts(db, run_id)
    assert bt[HUB] == len(bt)  # the hub loses most battles: last by BT ...
    assert ne[HUB][0] < bt[HUB]  # ... yet higher by NE, and the explanation says why
    assert f"disagree on {HUB}" in " ".join(output.split())


@pytest.mark.integration
def test_a_baseline_only_preference_table_is_rated_exactly_and_its_odd_answer_explained(tmp_path):
    table = baseline_preferences(tmp_path / "prefs.csv")
    db, run_id, output = _rate(tmp_path, "pairwise", table, "prefs")
    _assert_explained(output, db, run_id, judged_everywhere=BASELINE)
    # The NE rests on under 2% of the prompts: the answer leads with CCE, says why, and orders the table by it.
    text = " ".join(output.split())
    support = query(
        db,
        "SELECT count(*) FROM ratings WHERE run_id = ? AND method = 'ne' AND player = 'prompt' AND mass > 1e-6",
        [run_id],
    )[0][0]
    total = query(
        db, "SELECT count(*) FROM ratings WHERE run_id = ? AND method = 'ne' AND player = 'prompt'", [run_id]
    )[0][0]
    assert support < 0.02 * total
    lead = f"Leading with CCE: the NE does not rank these models reliably (it rests on {support} of {total:,} prompts"
    assert lead in text and "ordered by CCE;" in text
    cce_first = sorted(
        a
        for (a,) in query(
            db,
            "SELECT action FROM ratings WHERE run_id = ? AND method = 'cce' AND player = 'king' AND rank = 1",
            [run_id],
        )
    )
    named = cce_first[0] if len(cce_first) == 1 else ", ".join(cce_first[:-1]) + f" and {cce_first[-1]}"
    assert (f"Best model by CCE: {named} (" if len(cce_first) == 1 else f"{named} tie first by CCE") in text
    report = runner.invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "out")])
    assert report.exit_code == 0, report.output
    html = next((tmp_path / "out").glob("*.html")).read_text()
    panel = html[html.index('id="verdict"') : html.index("</section>", html.index('id="verdict"'))]
    assert "Read the NE with care" in panel and "rest mostly on imputed cells" in panel
    assert "Leading with CCE" in panel and "Ordered by CCE" in html
    # The method the answer leads with is diagnosed too: its tie at the top is explained, after the NE's block.
    cce_block = text[text.index("Read the CCE with care") :]
    assert text.index("Read the NE with care") < text.index("Read the CCE with care")
    if len(cce_first) > 1:
        assert f"{named} tie first: each is a best response as king" in cce_block
    assert "Read the CCE with care" in panel and 'id="diagnosis-lead"' in panel
    # Imported preferences come without answers: the advice is not to judge the missing pairs, which no judge
    # could, but to read BT or import their judgments.
    assert "judge the missing pairs (eqarena judge)" not in text
    assert "the dataset holds no answers of" in text and "import judgments of those pairs" in text
    assert "The prompts deciding the NE" in panel


def test_a_specialist_first_by_cce_and_far_down_by_bt_is_explained_by_its_cce_king_mass():
    models = [f"m{k}" for k in range(20)]  # m19 is the specialist: best CCE king, 18th on average
    ne = [("ne", m, k + 1, -0.05 * k, 1.0 if k == 0 else 0.0, 0.0) for k, m in enumerate(models)]
    cce = [("cce", "m19", 1, 0.0, 0.4, 0.0)] + [
        ("cce", m, k + 2, -0.05 * (k + 1), 0.6 / 19, 0.0) for k, m in enumerate(models[:19])
    ]
    mean = {m: -0.01 * k for k, m in enumerate(models)}
    mean["m19"], mean["m17"] = -0.175, -0.19  # 18th of 20
    found = diagnose(_evidence(_table(ne + cce), {"ne": {"king": (1, 20), "prompt": (40, 500)}}, mean=mean))
    gap = next(f for f in found.findings if "disagree on m19" in f)
    assert gap.startswith("NE and CCE disagree on m19: 20th of 20 by NE, 1st by CCE")
    assert "the CCE plays it as king (mass 40%), and a CCE can pair a king with the prompts it wins" in gap
    assert "it is 18th of 20, nearer its NE place" in gap


def test_the_answer_leads_with_cce_when_the_ne_cannot_rank_and_says_why():
    """An NE stopped on a continuum whose limit still moved (0.357), an NE resting on 8 of 1,024 prompts, and an
    NE giving 8 models 2 distinct ranks: each names CCE to lead with (BT where the run has no CCE), with the
    reason as a clause. A limit that last moved 1e-3, and a clean NE, keep the NE in the lead."""
    support = {"ne": {"king": (1, 3), "prompt": (30, 80)}}
    cce = [("cce", m, k + 1, -0.1 * k, None, 0.0) for k, m in enumerate("abc")]
    base = _evidence(_table(CLEAN + cce), support)
    stopped = diagnose(replace(base, limits={"ne": ("trace_stopped", 0.357)}))
    assert stopped.lead == "cce" and stopped.unfit == (
        "its solver stopped on a continuum of equilibria, so which one it selects is not pinned down",
    )
    near = diagnose(replace(base, limits={"ne": ("trace_stopped", 1e-3)}))
    assert any("stopped before the end of its branch" in f for f in near.findings)
    assert near.lead is None and near.unfit == ()
    assert diagnose(base).lead is None

    narrow = _evidence(_table(CLEAN), {"ne": {"king": (1, 3), "prompt": (8, 1024)}})
    assert diagnose(narrow).lead == "bt" and diagnose(narrow).unfit == ("it rests on 8 of 1,024 prompts",)

    models = [f"m{k}" for k in range(8)]
    ne = [("ne", "m0", 1, 0.0, 1.0, 0.0)] + [("ne", m, 2, -0.5, 0.0, 0.0) for m in models[1:]]
    bt = [("bt", m, k + 1, 1000.0 - k, None, None) for k, m in enumerate(models)]
    few = diagnose(_evidence(_table(ne + bt), {"ne": {"king": (1, 8), "prompt": (30, 80)}}))
    assert few.lead == "bt" and few.unfit == ("it gives 8 models only 2 distinct ranks",)


def test_the_advice_on_imputed_ratings_fits_where_the_data_came_from():
    """Ratings resting on imputed cells: with the models' answers in the dataset the advice is to judge the
    missing pairs; without them (imported judgments or scores) it names the models and says to read BT or
    import their judgments."""
    rows = [("ne", "a", 1, 0.0, 1.0, 0.9), ("ne", "b", 2, -0.3, 0.0, 0.8), ("ne", "c", 3, -0.6, 0.0, 0.1)]
    rows += [("bt", m, k + 1, 1000.0 - k, None, None) for k, m in enumerate("abc")]
    base = _evidence(_table(rows), {"ne": {"king": (1, 3), "prompt": (30, 80)}})
    judged = diagnose(replace(base, answered=frozenset("abc")))
    assert "judge the missing pairs (eqarena judge)" in judged.advice
    imported = diagnose(replace(base, answered=frozenset()))
    assert "judge the missing pairs (eqarena judge)" not in imported.advice
    assert "the dataset holds no answers of a and b to judge the missing pairs with" in imported.advice


def test_a_model_cce_rates_lower_is_not_called_a_specialist():
    """The specialist clause explains a model the CCE rates *higher*; one it rates lower than the NE, though
    it plays it as king, gets its mass and mean payoff only."""
    models = [f"m{k}" for k in range(8)]
    ne = [("ne", m, k + 1, -0.1 * k, 1.0 if k == 0 else 0.0, 0.0) for k, m in enumerate(models)]
    cce = [("cce", m, k + 1, -0.1 * k, 0.1, 0.0) for k, m in enumerate(models[1:])] + [("cce", "m0", 8, -0.9, 0.3, 0.0)]
    found = diagnose(_evidence(_table(ne + cce), {"ne": {"king": (1, 8), "prompt": (40, 500)}}))
    gap = next(f for f in found.findings if "disagree on m0" in f)
    assert gap.startswith("NE and CCE disagree on m0: 1st of 8 by NE, 8th by CCE")
    assert "the CCE plays it as king (mass 30%)" in gap and "specialist" not in gap
