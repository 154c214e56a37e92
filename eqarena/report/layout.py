"""The report's sections, their titles and the page style: main sections in reading order, and the
diagnostics and raw tables folded away (<details>)."""

from __future__ import annotations

from eqarena.report import html as page

MAIN_SECTIONS = {
    "ratings": "Ratings with 95% intervals",
    "support": "Equilibrium support of prompts and models",
    "payoffs": "King-vs-rebel payoffs on the top-rated prompts",
    "contributions": "Rating contributions by model family",
}


FOLDED_SECTIONS = {  # diagnostics and raw tables, folded away (<details>)
    "diagnostics": "Solver diagnostics",
    "coverage": "Data coverage",
    "intervals": "All bootstrap intervals, per method and scheme",
    "model-ratings": "All methods: ranks, ratings and mean payoffs",
}


SECTIONS = {**MAIN_SECTIONS, **FOLDED_SECTIONS}  # every report has these; clones and risk when analysed


OPTIONAL_SECTIONS = {  # main sections of some runs only
    "categories": "By category",  # a run rated with --by: after the ratings
}


CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; }
.verdict { background: #f3f7fb; border-left: 4px solid #4c72b0; padding: 0.2rem 1rem 0.4rem; margin: 1rem 0; }
.diagnosis { border-top: 1px solid #c9d6e6; margin-top: 0.6rem; }
.diagnosis h3 { margin: 0.5rem 0 0.2rem; font-size: 1rem; color: #8a4b08; }
.verdict h2 { border: none; margin-top: 0.6rem; } .verdict p { margin: 0.3rem 0; font-size: 1.05rem; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.4rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.55rem; text-align: right; }
th { background: #f4f4f4; } td.name, th.name { text-align: left; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.85rem; color: #555; }
.meta { color: #555; font-size: 0.9rem; } .note { font-size: 0.88rem; color: #444; }
nav a { margin-right: 1rem; } details > summary { cursor: pointer; } details > summary h2 { display: inline-block; }
section.folded h2 { font-size: 1.15rem; border: none; margin-top: 1.2rem; } figure.interactive { max-width: 100%; }
blockquote { font-size: 0.85rem; color: #444; margin: 0.3rem 0 0.8rem 1rem; }
table.categories td.top { background: #dce8f5; font-weight: bold; } table.categories small { font-weight: normal; }
"""


def section(key: str, body: str) -> str:
    """One titled section; folded away when it is a diagnostics or raw-table section."""
    if key in FOLDED_SECTIONS:
        return (
            f'<section id="{key}" class="folded"><details><summary><h2>{page.escape(SECTIONS[key])}</h2>'
            f"</summary>{body}</details></section>"
        )
    title = SECTIONS.get(key) or OPTIONAL_SECTIONS[key]
    return f'<section id="{key}"><h2>{page.escape(title)}</h2>{body}</section>'
