"""The report's "read with care" block under the verdict: the headline method's warning signs, the
method to read instead, and the prompts deciding its equilibrium (report/diagnosis.py)."""

from __future__ import annotations

from eqarena.methods import label
from eqarena.report import html as page
from eqarena.report.diagnosis import Diagnosis

PROMPT_TEXT_LIMIT = 300


def diagnosis_html(found: Diagnosis | None, anchor: str = "diagnosis") -> str:
    """Empty when there is nothing to warn about; `anchor`: the block's id."""
    if found is None or not found.findings:
        return ""
    name = label(found.method)
    items = "".join(f"<li>{page.escape(f)}</li>" for f in found.findings)
    advice = f'<p class="advice"><b>Read instead:</b> {page.escape(found.advice)}</p>' if found.advice else ""
    return (
        f'<div class="diagnosis" id="{page.escape(anchor)}"><h3>Read the {page.escape(name)} with care</h3>'
        f"<ul>{items}</ul>{advice}{_deciding_table(found)}</div>"
    )


def _deciding_table(found: Diagnosis) -> str:
    if not found.deciding:
        return ""
    pairs = list(dict.fromkeys((k, r) for p in found.deciding for k, r, _, _ in p.payoffs))
    texts = any(p.text for p in found.deciding)  # imported judgments often come without prompt texts
    header = ["prompt", "mass"] + (["text"] if texts else []) + [f"{k} vs {r}" for k, r in pairs]
    rows = []
    for p in found.deciding:
        cells = {(k, r): (u, imputed) for k, r, u, imputed in p.payoffs}
        text = p.text or ""
        text = text if len(text) <= PROMPT_TEXT_LIMIT else text[:PROMPT_TEXT_LIMIT].rstrip() + " …"
        rows.append(
            [p.prompt_id, f"{p.mass:.0%}"]
            + ([text] if texts else [])
            + [(f"{cells[c][0]:+.2f}" + ("*" if cells[c][1] else "")) if c in cells else None for c in pairs]
        )
    return (
        f'<p class="note">The prompts deciding the {page.escape(label(found.method))}, heaviest first, with '
        "the king's payoff against the rebel (−1 loss to +1 win; * imputed, no judge saw the pair):</p>"
        + page.table(header, rows, name_columns=3 if texts else 1)
    )
