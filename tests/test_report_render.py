"""The report's read path without Prefect: a rate run and both analyses written by the steps' own
code into a real DuckDB warehouse, read back through every typed reader and rendered. A renamed or
missing column fails here (the readers build their row types by column name), in the fast lane."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import fields

import matplotlib.pyplot as plt
import numpy as np
import pytest
from report_inputs import METHODS, MODELS, rated_warehouse

from eqarena import warehouse
from eqarena.report import analysis_figures, figures, interactive
from eqarena.report.layout import SECTIONS
from eqarena.report.render import render_html
from eqarena.tasks.report import load_report_data
from eqarena.warehouse import ratings as store


@pytest.fixture(scope="module")
def rated(tmp_path_factory):
    return rated_warehouse(tmp_path_factory.mktemp("render"))


def test_every_reader_builds_its_rows_from_the_stored_columns(rated):
    db, run_id = rated
    con = warehouse.connect(db, read_only=True)
    try:
        ratings = store.read_ratings(con, run_id)
        equilibria = store.read_equilibria(con, run_id)
        intervals = store.read_rating_intervals(con, run_id)
        readers = [
            ratings,
            equilibria,
            store.read_marginals(con, run_id),
            intervals,
            store.read_rank_probabilities(con, run_id),
            store.read_contributions_by_family(con, run_id),
            store.read_payoffs(con, run_id, ["0"]),
        ]
        coverage = store.read_coverage(con, run_id)
        run = store.read_run(con, run_id)
    finally:
        con.close()
    for rows in readers:
        assert rows and all(getattr(rows[0], f.name) is not None or f.name in _NULLABLE for f in fields(rows[0]))
    assert {r.method for r in ratings} == set(METHODS)
    assert {e.method for e in equilibria} == {"ne", "cce"} and all(e.exploitability <= 1e-6 for e in equilibria)
    assert {(e.method, p) for e in equilibria for p in e.support} == {
        (m, p) for m in ("ne", "cce") for p in ("prompt", "king", "rebel")
    }
    assert len(intervals) == 2 * 2 * len(MODELS)  # (ne, cce) x (prompts, judgments) x models
    assert len(coverage.pairs) == 12 and coverage.imputed_cells == 0 and coverage.inputs[0].judgments == 120
    assert run.kind == "rate" and run.parameters["methods"] == list(METHODS)


_NULLABLE = {
    "mass",
    "ci_lo",
    "ci_hi",
    "steps",
    "final_temperature",
    "joint_cells",
    "joint_mass_omitted",
    "max_exploitability",
}


def test_the_report_renders_every_section_from_the_readers(rated):
    db, run_id = rated
    data = load_report_data.fn(db, run_id)
    html = render_html(data)
    for key in SECTIONS:
        assert f'<section id="{key}">' in html or f'<section id="{key}" class="folded">' in html, key
    assert '<section id="clones">' in html and '<section id="risk">' not in html
    assert data.top_prompts and all(p in html for p in data.top_prompts)
    bt = [r for r in data.ratings if r.method == "bt" and r.player == "king"]
    assert len(bt) == len(MODELS) and all(r.ci_lo <= r.ci_hi for r in bt)
    assert f"{bt[0].rating:.3f}" in html  # the model-rating section lists BT with its interval


def _cpu_seconds() -> float:
    """Run in a helper process: the CPU time it has used."""
    times = os.times()
    return times.user + times.system


@pytest.mark.integration  # a helper process
def test_figures_drawn_by_a_helper_process_give_the_same_page(rated):
    """`render_html(data, pool)`: the pool's process draws figures while this one assembles the page and
    draws the ones it has not started; the page is byte for byte the one drawn here alone."""
    db, run_id = rated
    data = load_report_data.fn(db, run_id)
    alone = render_html(data)
    assert alone.count("data:image/png;base64,") >= 5 and "@@eqarena-figure" not in alone
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    try:
        before = pool.submit(_cpu_seconds).result(timeout=120)
        assert render_html(data, pool) == alone
        assert pool.submit(_cpu_seconds).result(timeout=120) - before > 0.05  # it did draw some
    finally:
        pool.shutdown()


@pytest.mark.integration  # a helper process, killed
def test_figures_of_a_broken_helper_pool_are_drawn_here(rated):
    db, run_id = rated
    data = load_report_data.fn(db, run_id)
    alone = render_html(data)
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    try:
        pool.submit(int).result(timeout=120)
        (helper,) = pool._processes.values()
        helper.kill()
        helper.join(timeout=10)
        assert render_html(data, pool) == alone
    finally:
        pool.shutdown()


def _displayed_px(fig, points: float) -> float:
    """Pixel height of `points`-sized text once the PNG is shown at most at the page's content width."""
    width_px = fig.get_figwidth() * figures.DPI
    return points * figures.DPI / 72 * min(1.0, figures.PAGE_WIDTH_IN * figures.DPI / width_px)


def test_rank_probability_labels_are_readable_and_titles_do_not_overlap():
    models = [f"model-{k}" for k in range(6)]
    rng = np.random.default_rng(0)
    probs = {m: rng.dirichlet(np.ones(6), size=6) for m in ("ne", "cce", "ne-shannon", "cce-shannon")}
    fig = figures.rank_probability_heatmaps(models, probs)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for ax in fig.axes for t in ax.texts]
    assert labels and min(_displayed_px(fig, t.get_fontsize()) for t in labels) >= 9
    suptitle = fig._suptitle.get_window_extent(renderer)
    for ax in fig.axes[:4]:
        assert not suptitle.overlaps(ax.title.get_window_extent(renderer)), ax.get_title()
    plt.close(fig)


def test_contribution_panels_share_one_colour_scale():
    deltas = {"ne": np.array([[0.1, -0.2], [0.0, 0.05]]), "cce": np.array([[1.5, -0.3], [0.2, 0.0]])}
    fig = figures.contribution_heatmaps(["k1", "k2"], ["f1", "f2"], deltas)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2 and {im.get_clim() for im in images} == {(-1.5, 1.5)}
    assert len(fig.axes) == 3  # two panels, one colourbar
    plt.close(fig)


def test_support_figure_leaves_out_models_without_mass():
    marginals = {"ne": {"king": np.array([1.0, 0.0, 0.0]), "rebel": np.array([0.5, 0.5, 0.0])}}
    fig = figures.model_marginals(["a", "b", "c"], marginals)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    assert "1 of 3 models without mass" in ax.get_title()
    assert [t.get_text() for t in ax.texts] == ["0"]  # b's empty king slot says so
    plt.close(fig)


def test_clone_and_risk_legends_name_every_model_outside_the_panels():
    models = ["a", "b", "c"]
    ranks = {("exact", "ne"): (np.array([0, 10]), np.array([[1, 2, 3], [2, 1, 3]]))}
    fig = analysis_figures.clone_ranks(["ne"], ["exact"], models, "a", ranks)
    fig.canvas.draw()
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["a (target)", "b", "c"]
    assert len({line.get_color() for line in fig.axes[0].lines}) == 3
    assert not legend.get_window_extent().overlaps(fig.axes[0].get_window_extent())
    plt.close(fig)
    king = np.array([[0.0, -0.5, -1.0], [-0.2, 0.0, -1.0]])
    payoffs = np.array([[0.1, 0.2, -0.3], [0.3, 0.1, -0.2]])
    fig = analysis_figures.risk_panels(models, king, payoffs, payoffs, 0)
    fig.canvas.draw()
    for ax in fig.axes:
        assert not ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())
    plt.close(fig)


def test_hover_text_is_clipped_escaped_and_wrapped():
    text = interactive.hover_text("<b>" + "word " * 100)
    assert text.startswith("&lt;b&gt;") and text.endswith("…") and "<br>" in text
    assert len(text.replace("<br>", " ").replace("&lt;", "<").replace("&gt;", ">")) <= interactive.PROMPT_CHARS + 2
