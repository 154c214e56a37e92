"""Verdict labels of imported judgments and the score each gives assistant A
(docs/game.md#verdict-labels-and-scores).

Five-label judges (arena-hard-auto, eqarena's `pairwise5`): `A>>B` +1, `A>B` +0.5, `A=B` 0, `B>A` -0.5,
`B>>A` -1; mirrored spellings (`B<A`) and spaces are accepted. Battle logs (Chatbot Arena, FastChat):
`model_a` +1, `model_b` -1, `tie` and `tie (bothbad)` 0.
"""

from __future__ import annotations

FIVE_LABELS = {"A>>B": 1.0, "A>B": 0.5, "A=B": 0.0, "B>A": -0.5, "B>>A": -1.0}
WINNERS = {"model_a": 1.0, "model_b": -1.0, "tie": 0.0, "tie (bothbad)": 0.0}
_MIRROR = str.maketrans("<>", "><")


def five_label(token: str | None) -> str | None:
    """The canonical five-label spelling of `token` ('b < a' -> 'A>B'), or None if it is not one."""
    if token is None:
        return None
    label = "".join(token.split()).upper()
    for candidate in (label, label[::-1].translate(_MIRROR)):
        if candidate in FIVE_LABELS:
            return candidate
    return None


def verdict_score(token: str) -> tuple[str, float] | None:
    """(label, A's score) for a five-label verdict or a battle winner, else None."""
    label = five_label(token)
    if label is not None:
        return label, FIVE_LABELS[label]
    winner = " ".join(token.split()).lower()
    if winner in WINNERS:
        return winner, WINNERS[winner]
    return None


def known_labels() -> str:
    return ", ".join([*FIVE_LABELS, *WINNERS])
