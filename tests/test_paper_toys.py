"""`eqarena paper toys`: the App. D / E tables in one command, with the paper's closed forms (RPS rates
every action 0; chicken's affinity NE swerves with probability 11/12; its deviation ratings are -1/2 and
-11/2, worked by hand in tests/test_deviation_ratings.py) and its clone-invariance claims."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.solvers.toys.tables import toy_tables

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def tables():
    return toy_tables()


def _row(rows, game, method, cloned=False):
    return next(r for r in rows if r.game == game and r.method == method and r.cloned == cloned)


def test_closed_forms(tables):
    rows, _ = tables
    for r in (r for r in rows if r.game == "rock-paper-scissors"):
        assert np.abs(r.rating).max() <= 1e-6 and r.exploitability <= 1e-6
    ne = _row(rows, "chicken", "NE (affinity)")
    assert ne.mass[0] == pytest.approx(11 / 12, abs=1e-6) and np.abs(ne.rating).max() <= 1e-6
    assert _row(rows, "chicken", "Deviation ratings").rating == pytest.approx([-0.5, -5.5], abs=1e-7)
    assert _row(rows, "chicken", "Deviation ratings", cloned=True).rating == pytest.approx([-0.5, -5.5, -5.5], abs=1e-7)


def test_clone_invariance_as_the_paper_claims(tables):
    _, checks = tables
    by = {(c.game, c.method): c for c in checks}
    for game in ("rock-paper-scissors", "chicken"):
        for method in ("NE (affinity)", "CCE (affinity)", "Deviation ratings"):
            assert by[(game, method)].invariant, by[(game, method)]
    assert not by[("chicken", "CCE (uniform)")].invariant  # the uniform (Shannon) target is not clone-invariant


def test_the_command_prints_every_table_and_the_clone_lines():
    result = CliRunner().invoke(app, ["paper", "toys"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    for title in (
        "rock-paper-scissors",
        "rock-paper-scissors with a cloned action",
        "chicken",
        "chicken with a cloned action",
    ):
        assert f"\n{title}\n" in "\n" + "\n".join(line.strip() for line in result.output.splitlines()) + "\n"
    assert "Straight (clone)" in result.output and "…" not in result.output  # nothing cut at 80 columns
    chicken = next(line for line in result.output.splitlines() if line.startswith("clone invariance, chicken"))
    assert "NE (affinity) unchanged" in chicken and "Deviation ratings unchanged" in chicken
    assert "CCE (uniform) moved by" in chicken
