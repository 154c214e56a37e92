"""The report in a real browser: Debian's Chromium, headless, driven by Playwright, opens a report written
from the small rated warehouse of tests/report_inputs.py. The verdict comes first and is visible, titles
do not overlap, the interactive plots draw and answer hover, and nothing is fetched from the network.

Without Chromium the test skips and says how to install it; under CI (CI=true) it fails instead."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from report_inputs import rated_warehouse

from eqarena.report.render import render_html
from eqarena.tasks.report import load_report_data

pytestmark = pytest.mark.integration  # starts a browser process

INSTALL = "apt-get install chromium"
TITLES = "h2, figcaption, figure.interactive .gtitle, figure.interactive .annotation-text"


def _chromium() -> str:
    found = shutil.which("chromium") or next((p for p in ("/usr/bin/chromium",) if Path(p).is_file()), None)
    if found is None:
        message = f"no Chromium for the browser test: install it with `{INSTALL}`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("browser")
    db, run_id = rated_warehouse(folder)
    path = folder / "report.html"
    path.write_text(render_html(load_report_data.fn(db, run_id)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def page(report):
    """The report open in headless Chromium, with every request and every error it caused."""
    executable = _chromium()
    with sync_playwright() as p:
        # as root in a container Chromium's sandbox cannot start
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.requests, page.errors = [], []
        page.on("request", lambda r: page.requests.append(r.url))
        page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        page.route(
            "**/*",
            lambda route: route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort(),
        )
        page.goto(report.as_uri(), wait_until="load")
        page.wait_for_selector("figure.interactive .main-svg")
        yield page
        browser.close()


def test_the_verdict_comes_first_and_is_visible(page):
    first = page.locator("section").first
    assert first.get_attribute("id") == "verdict"
    assert first.is_visible() and first.locator("h2").inner_text() == "Verdict"
    assert "by NE" in first.inner_text()
    box, nav = first.bounding_box(), page.locator("nav").bounding_box()
    assert box["y"] < nav["y"] and box["y"] < page.viewport_size["height"]  # on the first screen


def test_the_interactive_plots_render_and_answer_hover(page):
    plots = page.locator("figure.interactive")
    assert plots.count() == 3
    for k in range(plots.count()):
        svg = plots.nth(k).locator(".main-svg").first
        box = svg.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 150, plots.nth(k).get_attribute("data-figure")
        assert plots.nth(k).locator(".cartesianlayer .trace, .cartesianlayer .hm").count() > 0  # traces drawn
    point = page.locator('[data-figure="ratings-intervals"] .scatterlayer .point').first
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = page.locator('[data-figure="ratings-intervals"] .hoverlayer .hovertext')
    hover.first.wait_for(timeout=5000)
    text = hover.first.text_content()
    assert "95% interval" in text and "P(top 1)" in text
    assert page.errors == []


def test_titles_do_not_overlap(page):
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    boxes = []
    for handle in page.locator(TITLES).element_handles():
        box = handle.bounding_box()
        if box and box["width"] > 0 and box["height"] > 0:
            boxes.append((handle.text_content()[:60], box))
    assert len(boxes) > 10
    for n, (name, a) in enumerate(boxes):
        for other, b in boxes[n + 1 :]:
            overlap = (
                min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"]) > 1
                and min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"]) > 1
            )
            assert not overlap, (name, other)


def test_nothing_leaves_the_page(page, report):
    assert page.requests and page.requests[0] == report.as_uri()
    assert all(url.startswith(("data:", "about:")) for url in page.requests[1:]), page.requests
    assert page.errors == []
