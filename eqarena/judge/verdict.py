"""Reading a verdict out of a judge's output: the last valid `[[LABEL]]` it wrote.

Only the judge's own output is parsed (never the prompt, which lists every label). Judges often name
several labels while reasoning ("this is not [[A>>B]] territory..."); the final one is the decision.
Whitespace inside the brackets is ignored, and mirrored spellings are accepted (`B<A` is `A>B`,
`B=A` is `A=B`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eqarena.judge.templates import Template

_BRACKETED = re.compile(r"\[\[([^\[\]\n]{1,16})\]\]")
_MIRROR = str.maketrans("<>", "><")


@dataclass(frozen=True)
class Verdict:
    """A parsed verdict: the template's label and assistant A's score for it."""

    label: str
    score: float


def _normalise(token: str) -> str:
    return "".join(token.split()).upper()


def _mirrored(label: str) -> str:
    """'B<A' -> 'A>B': the same comparison read right to left."""
    return label[::-1].translate(_MIRROR)


def parse_verdict(output: str | None, template: Template) -> Verdict | None:
    """The last `[[LABEL]]` in `output` that is one of `template`'s labels, or None if there is none."""
    if not output:
        return None
    scores = dict(template.labels)
    for token in reversed(_BRACKETED.findall(output)):
        label = _normalise(token)
        for candidate in (label, _mirrored(label)):
            if candidate in scores:
                return Verdict(candidate, scores[candidate])
    return None
