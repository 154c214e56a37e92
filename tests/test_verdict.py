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
        "Best model by NE: a (rating +0.000, 95% interval -0.010 to +0.000, P(top 1) 97% over resampled prompts).",
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
