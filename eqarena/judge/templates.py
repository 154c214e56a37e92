"""Judge templates: the prompt a judge model sees, its verdict labels and their scores.

A template is a text file (`eqarena/judge/templates/NAME.txt`) with header lines, then a `[system]`
and a `[user]` section:

    # any comment
    # labels: A>>B=1 A>B=0.5 A=B=0 B>A=-0.5 B>>A=-1
    # expected_output_tokens: 450
    [system]
    ...the judge's instructions; it must ask for the final verdict as [[LABEL]]...
    [user]
    ...{question} ... {answer_a} ... {answer_b}...

A label's score is assistant A's payoff (docs/game.md#verdict-labels-and-scores). The template is identified by the
SHA-256 of the file's bytes (first 16 hex digits), recorded with every judgment, so editing a template
starts a fresh set of judgments instead of silently mixing two prompts.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from eqarena.exceptions import EqarenaError

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
DEFAULT_TEMPLATE = "pairwise5"
PLACEHOLDERS = ("{question}", "{answer_a}", "{answer_b}")

_LABEL = re.compile(r"^(A>>B|A>B|A=B|B>A|B>>A)=([+-]?\d+(?:\.\d+)?)$")
_SECTION = re.compile(r"^\[(system|user)\]\s*$")
_HEADER = re.compile(r"^#\s*([a-z_]+):\s*(.*)$")
_PLACEHOLDER_SPLIT = re.compile("(" + "|".join(re.escape(p) for p in PLACEHOLDERS) + ")")


class TemplateError(EqarenaError, ValueError):
    """A template file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Template:
    """A judge template. `labels` maps each verdict label to assistant A's score in [-1, 1]."""

    name: str
    system: str
    user: str
    labels: tuple[tuple[str, float], ...]
    expected_output_tokens: int
    hash: str

    def score(self, label: str) -> float:
        return dict(self.labels)[label]

    def messages(self, question: str, answer_a: str, answer_b: str) -> list[dict[str, str]]:
        """The chat messages for one comparison, assistant A shown first."""
        # One split on the placeholders, so a response that itself contains "{answer_b}" stays verbatim.
        values = dict(zip(PLACEHOLDERS, (question, answer_a, answer_b)))
        text = "".join(values.get(part, part) for part in _PLACEHOLDER_SPLIT.split(self.user))
        return [{"role": "system", "content": self.system}, {"role": "user", "content": text}]


def available_templates() -> list[str]:
    """Names of the templates shipped in eqarena/judge/templates/."""
    return sorted(p.stem for p in TEMPLATES_DIR.glob("*.txt"))


def template_path(name_or_path: str) -> Path:
    """A shipped template's file by name, or any template file by path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".txt" or candidate.parent != Path("."):
        if not candidate.is_file():
            raise TemplateError(f"template file {candidate} does not exist")
        return candidate
    path = TEMPLATES_DIR / f"{name_or_path}.txt"
    if not path.is_file():
        raise TemplateError(
            f"unknown template {name_or_path!r}; shipped templates: {', '.join(available_templates())} "
            f"(or give the path of a .txt template file)"
        )
    return path


def load_template(name_or_path: str = DEFAULT_TEMPLATE) -> Template:
    """Read and validate a template. Raises TemplateError naming the file and line of a problem."""
    path = template_path(name_or_path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"{path}: not UTF-8 text ({exc})") from None
    header: dict[str, tuple[int, str]] = {}
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        section = _SECTION.match(line)
        if section:
            if section.group(1) in sections:
                raise TemplateError(f"{path}:{lineno}: section [{section.group(1)}] appears twice")
            current = section.group(1)
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
        elif line.startswith("#"):
            match = _HEADER.match(line)
            if match and match.group(1) in ("labels", "expected_output_tokens"):
                header[match.group(1)] = (lineno, match.group(2).strip())
        elif line.strip():
            raise TemplateError(f"{path}:{lineno}: text before the [system] section (header lines start with '#')")
    for required in ("system", "user"):
        if required not in sections:
            raise TemplateError(f"{path}: missing the [{required}] section")
    if "labels" not in header:
        raise TemplateError(f"{path}: missing the '# labels: A>B=1 A=B=0 B>A=-1' header line")
    labels = _parse_labels(path, *header["labels"])
    tokens = 400
    if "expected_output_tokens" in header:
        lineno, value = header["expected_output_tokens"]
        if not value.isdigit() or int(value) <= 0:
            raise TemplateError(f"{path}:{lineno}: expected_output_tokens must be a positive integer, got {value!r}")
        tokens = int(value)
    system = "\n".join(sections["system"]).strip()
    user = "\n".join(sections["user"]).strip()
    for placeholder in PLACEHOLDERS:
        if user.count(placeholder) != 1:
            raise TemplateError(f"{path}: the [user] section must contain {placeholder} exactly once")
    for label, _ in labels:
        if f"[[{label}]]" not in system + user:
            raise TemplateError(f"{path}: label {label} is declared but the template never shows [[{label}]]")
    return Template(
        name=path.stem,
        system=system,
        user=user,
        labels=labels,
        expected_output_tokens=tokens,
        hash=hashlib.sha256(raw).hexdigest()[:16],
    )


def _parse_labels(path: Path, lineno: int, value: str) -> tuple[tuple[str, float], ...]:
    labels = []
    for item in value.split():
        match = _LABEL.match(item)
        if not match:
            raise TemplateError(
                f"{path}:{lineno}: bad label {item!r}; write LABEL=SCORE with LABEL one of A>>B A>B A=B B>A B>>A"
            )
        score = float(match.group(2))
        if not -1 <= score <= 1:
            raise TemplateError(f"{path}:{lineno}: score of {match.group(1)} must lie in [-1, 1], got {score}")
        labels.append((match.group(1), score))
    names = [name for name, _ in labels]
    if len(labels) < 2 or len(set(names)) != len(names):
        raise TemplateError(f"{path}:{lineno}: need at least two distinct labels, got {value!r}")
    return tuple(labels)
