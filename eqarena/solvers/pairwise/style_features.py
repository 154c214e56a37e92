"""Style features of two answers: length and markdown, as arena-hard-auto's style control defines them.

Per answer (arena-hard-auto utils/add_markdown_info.py): its length in tokens, and, with fenced code
blocks (```...```) removed, the count of markdown headers (lines starting `#` ... `######` then a
space), list items (lines starting `1.` or `-`, `*`, `+` then a space, after optional indentation) and
bold spans (`**...**`, `__...__` within a line). Tokens are counted as words and punctuation marks
(`\\w+|[^\\w\\s]`), an approximation of arena-hard-auto's tiktoken count that needs no tokenizer.

Per judgment, answer a against answer b (show_result.py): the length feature is
(len_a - len_b) / (len_a + len_b); each markdown count becomes a density d = count / (len + 1) and
its feature (d_a - d_b) / (d_a + d_b + 1). The fit standardises each feature over the judgments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

FEATURES = ("length", "headers", "lists", "bold")

_CODE = re.compile(r"```[^`]*```")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:\d+\.|[-*+])\s", re.MULTILINE)
_BOLD = (re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__"))


def style_counts(text: str) -> np.ndarray:
    """(tokens, headers, list items, bold spans) of one answer."""
    plain = _CODE.sub("", text)
    return np.array(
        [
            len(_TOKEN.findall(text)),
            len(_HEADER.findall(plain)),
            len(_LIST.findall(plain)),
            sum(len(p.findall(plain)) for p in _BOLD),
        ],
        dtype=np.float64,
    )


def style_difference(counts_a: np.ndarray, counts_b: np.ndarray) -> np.ndarray:
    """Normalised differences (..., 4) of answers a and b from their counts (..., 4) (module docstring)."""
    a, b = np.asarray(counts_a, dtype=np.float64), np.asarray(counts_b, dtype=np.float64)
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    total = a[..., 0] + b[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        out[..., 0] = np.where(total == 0, 0.0, (a[..., 0] - b[..., 0]) / total)  # NaN stays NaN
    da, db = a[..., 1:] / (a[..., :1] + 1.0), b[..., 1:] / (b[..., :1] + 1.0)
    out[..., 1:] = (da - db) / (da + db + 1.0)
    return out


def battle_style_features(
    battles: Mapping[str, np.ndarray],
    prompts: Sequence[str],
    models: Sequence[str],
    texts: Mapping[tuple[str, str], str],
) -> np.ndarray:
    """(K, 4) style differences of each judgment's answers (model_a's minus model_b's), from `texts`
    {(prompt_id, model_id): answer}; a row is NaN where either answer's text is missing."""
    p, m = len(prompts), len(models)
    counts = np.full((p, m, len(FEATURES)), np.nan)
    index = {name: k for k, name in enumerate(prompts)}, {name: k for k, name in enumerate(models)}
    for (prompt, model), text in texts.items():
        if prompt in index[0] and model in index[1] and text is not None:
            counts[index[0][prompt], index[1][model]] = style_counts(text)
    q = np.asarray(battles["prompt"])
    return style_difference(counts[q, np.asarray(battles["model_a"])], counts[q, np.asarray(battles["model_b"])])
