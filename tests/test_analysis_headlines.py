"""The one-sentence verdicts of the robustness analyses (report/analysis_headlines.py): whether copies of
prompts move the headline method's ranks, and whether the other Nash equilibria put another model first."""

from __future__ import annotations

import polars as pl
import pytest

from eqarena.report.analysis_headlines import clone_headline, risk_headline

pytestmark = pytest.mark.unit


def _robustness(ranks: dict[tuple[str, str, int], list[int]], models=("a", "b", "c")) -> pl.DataFrame:
    rows = [(variant, n, method, m, r) for (method, variant, n), rs in ranks.items() for m, r in zip(models, rs)]
    return pl.DataFrame(rows, schema=["variant", "n_clones", "method", "model_id", "rank"], orient="row")


def test_ranks_that_hold_under_copies_say_so_and_bt_moving_is_reported():
    rows = _robustness(
        {
            ("ne", "exact", 0): [1, 2, 3],
            ("ne", "exact", 250): [1, 2, 3],
            ("ne", "exact", 500): [1, 2, 3],
            ("ne", "noisy", 0): [1, 2, 3],
            ("ne", "noisy", 1000): [1, 2, 3],
            ("bt", "exact", 0): [1, 2, 3],
            ("bt", "exact", 250): [2, 1, 3],
            ("bt", "exact", 500): [3, 1, 2],
        }
    )
    line = clone_headline(rows, "ne", "a")
    assert "NE ranking holds with up to 500 exact and 1,000 noisy copies of the prompts a is weakest on" in line
    assert "BT's changes at 250 exact copies (a falls from 1st to 2nd)" in line
    assert line.endswith("redundant prompts do not decide this ranking.")


def test_ranks_that_move_under_exact_copies_put_the_ranking_in_doubt():
    rows = _robustness(
        {("ne", "exact", 0): [1, 2, 3], ("ne", "exact", 250): [1, 3, 2], ("ne", "exact", 500): [2, 3, 1]}
    )
    line = clone_headline(rows, "ne", "a")
    assert "changes at 250 exact copies (other models move)" in line
    assert "redundant prompts can change this ranking" in line


def _risk(tops: list[dict[str, float]], selected_rank: int = 1):
    dominance = pl.DataFrame(
        {
            "equilibrium": list(range(len(tops))),
            "is_selected": [k == 0 for k in range(len(tops))],
            "rank_updated": [selected_rank] + list(range(2, len(tops) + 1)),
        }
    )
    kings = pl.DataFrame(
        [(k, m, r) for k, ratings in enumerate(tops) for m, r in ratings.items()],
        schema=["equilibrium", "action", "rating"],
        orient="row",
    )
    return dominance, kings


def test_equilibria_that_all_agree_leave_the_ranking_not_in_doubt():
    dominance, kings = _risk([{"a": 0.0, "b": -0.5, "c": -0.9}] * 10)
    line = risk_headline(dominance, kings, ["a", "a"])
    assert "of the 10 Nash equilibria found, 10 put a first (as do all 2 pure ones) and 10 give" in line
    assert line.endswith("the ranking is not in doubt.")


def test_equilibria_with_other_winners_put_the_top_in_doubt_and_name_them():
    tops = (
        [{"a": 0.0, "b": -0.5, "c": -0.9}] * 6
        + [{"a": -0.2, "b": 0.0, "c": -0.9}] * 3
        + [{"a": -0.00001, "b": -0.3, "c": 0.0}]
    )
    dominance, kings = _risk(tops, selected_rank=4)
    line = risk_headline(dominance, kings, ["a", "b"])
    assert "7 put a first (1 of the 2 pure ones)" in line  # the last one ties a and c within 1e-4
    assert "the selected NE is the 4th least risky of 10" in line
    assert "the top depends on which equilibrium is played (b first in 3 of 10, c first in 1 of 10)" in line
