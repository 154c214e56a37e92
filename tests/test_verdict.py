"""The headline sentences of a rate run (eqarena/report/verdict.py) on small hand-made rating tables."""

from __future__ import annotations

import polars as pl
import pytest

from eqarena.report.verdict import headline_method, verdict

pytestmark = pytest.mark.unit


def _table(rows) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["method", "action", "rank", "rating", "ci_lo", "ci_hi", "p_top1"], orient="row")


def test_one_best_model_with_its_interval_and_agreement():
    table = _table(
        [
            ("ne", "a", 1, 0.0, -0.01, 0.0, 0.97),
            ("ne", "b", 2, -0.5, -0.6, -0.4, 0.03),
            ("bt", "a", 1, 1100.0, 1080.0, 1120.0, None),
            ("bt", "b", 2, 900.0, 880.0, 920.0, None),
            ("cce", "a", 1, 0.0, 0.0, 0.0, 0.6),
            ("cce", "b", 1, 0.0, -0.1, 0.0, 0.4),
        ]
    )
    found = verdict(table)
    assert found.method == "ne" and found.best == ("a",)
    assert found.lines == (
        "Best model by NE: a (rating +0.000, 95% interval -0.010 to 0, the most an equilibrium rating can be, "
        "P(top 1) 97% over resampled prompts).",
        "All 3 methods rank a first (CCE ties b with it).",
    )


def test_an_unsettled_top_and_disagreeing_methods_are_said():
    table = _table(
        [
            ("ne", "a", 1, 0.0, -0.2, 0.0, 0.55),
            ("ne", "b", 2, -0.1, -0.3, 0.0, 0.45),
            ("bt", "b", 1, 1050.0, None, None, None),
            ("bt", "a", 2, 950.0, None, None, None),
        ]
    )
    found = verdict(table)
    assert found.lines[1] == "The top spot is not settled: P(top 1) a 55%, b 45%."
    assert found.lines[2] == "The methods disagree on the top: BT: b."


def test_a_tie_without_bootstrap():
    table = _table(
        [
            ("cce", "a", 1, 0.0, None, None, None),
            ("cce", "b", 1, 0.0, None, None, None),
            ("cce", "c", 3, -0.2, None, None, None),
        ]
    )
    found = verdict(table)
    assert found.best == ("a", "b")
    assert found.lines == ("a and b tie first by CCE (rating +0.000).", "Only one method was rated.")


def test_headline_method_prefers_the_papers_ratings():
    assert headline_method(["bt", "cce", "ne"]) == "ne"
    assert headline_method(["bt", "cce-shannon", "cce"]) == "cce"
    assert headline_method(["bt", "ne-shannon"]) == "ne-shannon"
    assert headline_method(["bt"]) == "bt"


def test_the_answer_leads_with_the_method_the_diagnosis_names_and_says_why():
    """A diagnosis that finds the NE unfit to rank leads the answer with its CCE: first why, then CCE's best
    (here a tie), then the other methods, which break the tie. Without it, or naming a method the run did not
    rate, the NE leads."""
    from eqarena.report.diagnosis import Diagnosis
    from eqarena.report.verdict import lead_method

    table = _table(
        [
            ("ne", "a", 1, 0.0, None, None, None),
            ("ne", "b", 2, -0.5, None, None, None),
            ("bt", "a", 1, 1100.0, None, None, None),
            ("bt", "b", 2, 900.0, None, None, None),
            ("cce", "a", 1, 0.0, None, None, None),
            ("cce", "b", 1, 0.0, None, None, None),
        ]
    )
    unfit = Diagnosis("ne", ("a finding",), None, (), "cce", ("it rests on 2 of 900 prompts",))
    found = verdict(table, unfit)
    assert found.method == "cce" and found.best == ("a", "b")
    assert found.lines == (
        "Leading with CCE: the NE does not rank these models reliably (it rests on 2 of 900 prompts; see below).",
        "a and b tie first by CCE (rating +0.000).",
        "The other methods break the tie: BT and NE put a first.",
    )
    assert lead_method(["bt", "cce", "ne"], unfit) == "cce"
    assert lead_method(["bt", "ne"], unfit) == "ne"
    assert lead_method(["bt", "cce", "ne"], None) == "ne"
    assert verdict(table).method == "ne"


def test_intervals_that_hold_the_point_by_construction_say_so():
    """An interval whose bounds print alike is "no spread"; an equilibrium's upper bound at 0 is "0 (max)"
    (no deviation gain exceeds 0), a Bradley-Terry bound at 0 is a number; the note explains what is shown."""
    from eqarena.methods import format_interval, interval_note

    assert format_interval("ne", -0.4321, -0.4324) == "-0.432, no spread"
    assert format_interval("ne", -0.2, 1e-13) == "[-0.200, 0 (max)]"
    assert format_interval("cce", -0.2, -0.1) == "[-0.200, -0.100]"
    assert format_interval("bt", 990.0, 1010.0) == "[990, 1010]"
    assert format_interval("ne", None, 0.0) == "–"
    shown = ["[-0.200, 0 (max)]", "-0.432, no spread", "[-0.2, -0.1]"]
    assert interval_note(shown) == (
        "no spread: the central 95% of replicates give that rating; "
        "0 (max): no equilibrium rating exceeds 0, a best response's (eq. 1)"
    )
    assert interval_note(["[-0.2, -0.1]"]) == ""
    table = _table([("ne", "a", 1, 0.0, 0.0, 0.0, 1.0), ("ne", "b", 2, -0.5, -0.6, -0.4, 0.0)])
    assert verdict(table).lines[0] == (
        "Best model by NE: a (rating +0.000, the same in the central 95% of replicates, P(top 1) 100% over "
        "resampled prompts)."
    )
