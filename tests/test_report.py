"""The HTML report: one self-contained file whose every section and figure is present and matches the
warehouse. Parsed with html.parser; static figures are decoded and checked to be PNG images, interactive
ones to carry their plot. (tests/test_report_browser.py opens a report in Chromium.)"""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.options import BootstrapOptions, RateOptions
from eqarena.report.layout import FOLDED_SECTIONS, MAIN_SECTIONS, SECTIONS
from eqarena.tasks.report import TOP_PROMPTS
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments
from tests.conftest import query

FIGURES = {
    "ratings": {"ratings-intervals", "rank-probabilities"},
    "support": {"prompt-support", "support"},
    "payoffs": {"payoff-heatmaps"},
    "contributions": {"contributions"},
    "diagnostics": {"diagnostics"},
    "coverage": {"coverage"},
    "intervals": set(),
    "model-ratings": {"rank-comparison"},
}
INTERACTIVE = {"ratings-intervals", "prompt-support", "payoff-heatmaps"}
MODELS = ("alpha-1", "alpha-2", "beta-large", "gamma")


class ReportParser(HTMLParser):
    """Collects sections (id -> headings, figures, images, table cells, text) and every URL attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.current: str | None = None
        self.urls: list[tuple[str, str, str]] = []
        self.tags: set[str] = set()
        self.title = ""
        self._in_title = False
        self._in_cell = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        for key in ("src", "href"):
            if key in attrs:
                self.urls.append((tag, key, attrs[key]))
        if tag == "section":
            self.current = attrs["id"]
            self.sections[self.current] = {
                "h2": "",
                "figures": [],
                "images": [],
                "cells": [],
                "text": "",
                "details": 0,
                "plots": [],
            }
        elif self.current is None:
            self._in_title = tag == "title"
            return
        section = self.sections[self.current]
        if tag == "figure":
            section["figures"].append(attrs.get("data-figure"))
        elif tag == "details":
            section["details"] += 1
        elif tag == "div" and (attrs.get("id") or "").startswith("plot-"):
            section["plots"].append(attrs["id"])
        elif tag == "img":
            section["images"].append(attrs["src"])
        elif tag in ("td", "th"):
            self._in_cell = True
            section["cells"].append("")

    def handle_endtag(self, tag):
        if tag == "section":
            self.current = None
        if tag in ("td", "th"):
            self._in_cell = False
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if self.current is None:
            return
        section = self.sections[self.current]
        section["text"] += data
        if self._in_cell:
            section["cells"][-1] += data.strip()


@pytest.fixture(scope="module")
def rated(prefect_harness, tmp_path_factory):
    """A synthetic 12-prompt x 4-model warehouse with one incomplete prompt, rated by every method
    (drop-prompts), then reported."""
    from eqarena.flows import rate_flow, report_flow

    tmp = tmp_path_factory.mktemp("report")
    db = str(tmp / "w.duckdb")
    rng = np.random.default_rng(5)
    skill = dict(zip(MODELS, (1.0, 0.8, 0.0, -0.7)))
    con = warehouse.connect(db)
    con.execute(
        "INSERT INTO models (model_id, family) VALUES ('alpha-1', 'alpha'), ('alpha-2', 'alpha'), "
        "('beta-large', 'beta'), ('gamma', 'gamma')"
    )
    rows = []
    for p in range(1, 13):
        con.execute(
            "INSERT INTO prompts (dataset, prompt_id, text) VALUES ('syn', ?, ?)",
            [str(p), f"Question {p}: <explain> & compare"],
        )
        for a in MODELS:
            for b in MODELS:
                if a == b or (p == 12 and "gamma" in (a, b)):
                    continue
                for k in range(2):
                    d = skill[a] - skill[b] + rng.normal(0, 0.8)
                    rows.append(
                        JudgmentRow(
                            "judge-x",
                            "t",
                            "syn",
                            str(p),
                            a,
                            b,
                            k,
                            "ok",
                            score=float(np.clip(np.round(d * 2) / 2, -1, 1)),
                        )
                    )
    rows.append(JudgmentRow("judge-x", "t", "syn", "1", "alpha-1", "gamma", 9, "unparsed", raw_text="??"))
    insert_judgments(con, rows)
    con.close()
    result = rate_flow(
        RateOptions(
            dataset="syn", judges=["judge-x"], missing="drop-prompts", bootstrap=BootstrapOptions(replicates=20)
        ),
        db,
    )
    path = report_flow(None, str(tmp / "out"), db)
    return db, result, Path(path)


def _parse(path: Path) -> ReportParser:
    parser = ReportParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_section_and_figure_is_present(rated):
    _, result, path = rated
    assert path.name == f"eqarena-{result.run_id}.html"
    report = _parse(path)
    # the answer first, then the ratings and the evidence, then what is folded away
    assert list(report.sections) == ["verdict", *MAIN_SECTIONS, *FOLDED_SECTIONS]
    assert not report.sections["verdict"]["figures"]
    html = path.read_text(encoding="utf-8")
    assert re.search(r'<section id="verdict".*?<p>(Best model by NE: |\S.* tie first by NE )', html)
    for key in SECTIONS:
        section = report.sections[key]
        assert section["details"] == (1 if key in FOLDED_SECTIONS else 0), key
        assert set(section["figures"]) == FIGURES[key], key
        static = FIGURES[key] - INTERACTIVE
        assert len(section["images"]) == len(static), key
        assert section["plots"] == [f"plot-{name}" for name in section["figures"] if name in INTERACTIVE], key
        for src in section["images"]:
            assert src.startswith("data:image/png;base64,")
            png = base64.b64decode(src.split(",", 1)[1], validate=True)
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    assert "syn" in report.title and result.run_id in report.title


def test_every_prompt_shown_in_the_support_has_its_stored_text(rated):
    db, result, path = rated
    html = path.read_text(encoding="utf-8")
    supported = query(
        db,
        "SELECT DISTINCT action FROM equilibrium_marginals WHERE run_id = ? AND player = 'prompt' AND mass >= 1e-6",
        [result.run_id],
    )
    assert len(supported) > TOP_PROMPTS  # more prompts in the support than the payoff section shows
    assert "(text not in warehouse)" not in html
    for (prompt,) in supported:
        assert f"Question {prompt}: &lt;explain&gt;" in html  # in a hover (escaped), or a blockquote


def test_report_is_self_contained(rated):
    _, _, path = rated
    report = _parse(path)
    for tag, key, url in report.urls:
        assert url.startswith("data:") or url.startswith("#"), (tag, key, url)
    assert not {"link", "iframe"} & report.tags
    html = path.read_text(encoding="utf-8")
    assert html.count("<script") == 1 + len(INTERACTIVE)  # plotly.js once, then one short script per plot
    assert not re.search(r"<script[^>]*\bsrc=", html)


def _ratings(db, run_id, method, player="king"):
    con = warehouse.connect(db, read_only=True)
    try:
        return con.execute(
            "SELECT action, rank, rating FROM ratings WHERE run_id = ? AND method = ? AND player = ? "
            "ORDER BY rank, action",
            [run_id, method, player],
        ).fetchall()
    finally:
        con.close()


def test_tables_match_the_warehouse(rated):
    db, result, path = rated
    report = _parse(path)
    cells = report.sections["model-ratings"]["cells"]
    for model in MODELS:
        assert model in cells
    header = cells[: cells.index(MODELS[0]) if MODELS[0] in cells else 0]
    for method in ("bt", "ne", "cce", "ne-shannon", "cce-shannon"):
        assert f"{method} rank" in header and f"{method} rating" in header
    # the headline table: in NE's order, with every other method's rank
    ratings = report.sections["ratings"]["cells"]
    header = ratings[:9]
    assert header == [
        "model",
        "NE rank",
        "NE rating",
        "95% interval",
        "P(top 1)",
        "BT rank",
        "CCE rank",
        "NE-Shannon rank",
        "CCE-Shannon rank",
    ]
    rows = [ratings[k : k + 9] for k in range(9, len(ratings), 9)]
    ne, bt = _ratings(db, result.run_id, "ne"), dict((a, r) for a, r, _ in _ratings(db, result.run_id, "bt"))
    assert [(row[0], row[1]) for row in rows] == [(name, str(rank)) for name, rank, _ in ne]
    assert [row[5] for row in rows] == [str(bt[name]) for name, _, _ in ne]
    interval = re.compile(r"\[[+-]\d\.\d{3}, ([+-]\d\.\d{3}|0 \(max\))\]|[+-]\d\.\d{3}, no spread")
    assert all(interval.fullmatch(row[3]) and row[4].endswith("%") for row in rows), [row[3] for row in rows]
    # the folded interval table lists Bradley-Terry's own intervals, best first
    table = report.sections["intervals"]["cells"]
    shown = [table[k + 2] for k in range(8, len(table), 8) if table[k] == "bt"]
    assert shown == [name for name, _, _ in _ratings(db, result.run_id, "bt")]
    diagnostics = report.sections["diagnostics"]["cells"]
    con = warehouse.connect(db, read_only=True)
    try:
        eqs = dict(
            con.execute("SELECT method, exploitability FROM equilibria WHERE run_id = ?", [result.run_id]).fetchall()
        )
    finally:
        con.close()
    assert set(eqs) == {"ne", "cce", "ne-shannon", "cce-shannon"}
    for method, value in eqs.items():
        row = diagnostics.index(method)
        shown = diagnostics[row + 4]
        assert float(shown) == pytest.approx(value, rel=0.06, abs=6e-4)


def test_payoff_section_shows_the_top_rated_prompts(rated):
    db, result, path = rated
    report = _parse(path)
    text = report.sections["payoffs"]["text"]
    top = _ratings(db, result.run_id, "ne", "prompt")
    con = warehouse.connect(db, read_only=True)
    try:
        mass = dict(
            con.execute(
                "SELECT action, mass FROM equilibrium_marginals WHERE run_id = ? AND method = 'ne' "
                "AND player = 'prompt'",
                [result.run_id],
            ).fetchall()
        )
    finally:
        con.close()
    best = sorted(top, key=lambda r: (r[1], -mass[r[0]], r[0]))[:4]
    for prompt, _, _ in best:
        assert f"prompt {prompt}" in text and f"Question {prompt}: <explain> & compare" in text


def test_coverage_and_contributions_sections(rated):
    _, _, path = rated
    report = _parse(path)
    coverage = report.sections["coverage"]
    assert "--missing drop-prompts dropped 1 prompt(s): 12" in coverage["text"]
    cells = coverage["cells"]
    assert cells[cells.index("unparsed") + 1] == "1"
    assert cells[cells.index("ok") + 1] == str(12 * 12 * 2 - 6 * 2)
    contributions = report.sections["contributions"]["cells"]
    for family in ("alpha", "beta", "gamma"):
        assert family in contributions


def test_report_command_for_a_named_run_and_an_unknown_one(rated, tmp_path):
    db, result, _ = rated
    runner = CliRunner()
    ok = runner.invoke(app, ["report", "--db", db, "--run", result.run_id, "--out", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    written = tmp_path / f"eqarena-{result.run_id}.html"
    assert written.is_file() and f"report: {written.resolve()}" in ok.output
    missing = runner.invoke(app, ["report", "--db", db, "--run", "rate-nope", "--out", str(tmp_path)])
    assert missing.exit_code == 1
    assert missing.output.strip() == "error: no run 'rate-nope' in the warehouse"
