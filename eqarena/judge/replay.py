"""The replay judge `recorded:<judge>[@DB]`: serves the stored judgments of `<judge>` as API answers.

A request is recognised by its messages: the run's template (found among the shipped templates by its
system text) rendered for every recorded (dataset, prompt, model_a, model_b) gives the lookup table. The
k-th request for a cell (k counted from the replay judge's own next sample index of that cell, so a
resumed run continues where the last one stopped) returns the recorded sample k: its raw text followed
by `[[LABEL]]`, the run template's label with the recorded score, so the normal verdict parsing and
write path give back exactly the recorded score. A cell or sample the recording lacks, or a score the
template has no label for, raises `RecordingMissing`: the runner stores an `error` row (never a tie).

Offline and deterministic: the recording is read from the warehouse once, when the provider is made.
Judgments are stored under `recorded:<judge>`, never mixed with the originals; cost is 0; "tokens" are
the usual estimates (prompt ~ 4 characters per token, output the recorded count or the text's estimate).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from eqarena import warehouse
from eqarena.judge.templates import Template, available_templates, load_template
from eqarena.llm.pricing import estimate_message_tokens, estimate_tokens
from eqarena.llm.providers import (
    Completion,
    GenerationOptions,
    JudgeSpec,
    Messages,
    Provider,
)
from eqarena.warehouse.judgments import read_recorded_judgments, read_replay_next_indices

RECORDED = "recorded"

Cell = tuple[str, str, str, str]  # (dataset, prompt_id, model_a, model_b)


class RecordingMissing(LookupError):
    """The recording has no usable sample for a requested cell: stored as an error row."""


@dataclass(frozen=True)
class RecordedSample:
    """One stored judgment of the recorded judge (score None: it was unparsed)."""

    score: float | None
    verdict: str | None
    raw_text: str | None
    tokens_out: int | None


@dataclass
class Recording:
    """The recorded judge's samples per cell (in sample-index order) and the texts to recognise requests."""

    judge: str
    samples: dict[Cell, list[RecordedSample]]
    questions: dict[tuple[str, str], str]  # (dataset, prompt_id) -> question
    answers: dict[tuple[str, str, str], str]  # (dataset, prompt_id, model_id) -> answer
    next_index: dict[tuple[str, Cell], int] = field(default_factory=dict)  # (template_hash, cell) -> next index


def _digest(messages: Messages) -> str:
    return hashlib.sha256("\x00".join(f"{m['role']}\x01{m['content']}" for m in messages).encode()).hexdigest()


def load_recording(db: str | None, judge: str, replay_judge: str) -> Recording:
    """The recording of `judge` and the replay judge's next sample index per cell, read from `db`."""
    con = warehouse.connect(db)
    try:
        rows, questions, answers = read_recorded_judgments(con, judge)
        next_index = read_replay_next_indices(con, replay_judge)
    finally:
        con.close()
    samples: dict[Cell, list[RecordedSample]] = {}
    for dataset, prompt_id, model_a, model_b, _index, score, verdict, raw_text, tokens_out in rows:
        samples.setdefault((dataset, prompt_id, model_a, model_b), []).append(
            RecordedSample(score, verdict, raw_text, tokens_out)
        )
    return Recording(judge, samples, questions, answers, {(t, (d, p, a, b)): n for t, d, p, a, b, n in next_index})


def label_for(template: Template, score: float, recorded_label: str | None = None) -> str | None:
    """The template's label with exactly `score` (the recorded label first if it has that score)."""
    labels = dict(template.labels)
    if recorded_label in labels and labels[recorded_label] == score:
        return recorded_label
    return next((name for name, value in template.labels if value == score), None)


class ReplayProvider(Provider):
    """`recorded:<judge>`: answers requests with the recorded judgments (module docstring)."""

    def __init__(self, spec: JudgeSpec, recording: Recording, templates: tuple[Template, ...] | None = None):
        super().__init__(spec)
        self.recording = recording
        self.templates = templates if templates is not None else tuple(load_template(n) for n in available_templates())
        self._lookup: dict[str, dict[str, Cell]] = {}  # template hash -> messages digest -> cell
        self._served: dict[tuple[str, Cell], int] = {}  # requests answered (or failed) per cell so far
        self.calls = 0
        self.tokens_in = 0
        self.tokens_out = 0

    def _template_of(self, messages: Messages) -> Template:
        system = next((m["content"] for m in messages if m["role"] == "system"), None)
        for template in self.templates:
            if template.system == system:
                return template
        raise RecordingMissing("replay judge: the request's template is not a shipped one; give it to ReplayProvider")

    def _cells(self, template: Template) -> dict[str, Cell]:
        if template.hash not in self._lookup:
            rec = self.recording
            self._lookup[template.hash] = {
                _digest(template.messages(rec.questions[d, p], rec.answers[d, p, a], rec.answers[d, p, b])): (
                    d,
                    p,
                    a,
                    b,
                )
                for d, p, a, b in rec.samples
                if (d, p) in rec.questions and (d, p, a) in rec.answers and (d, p, b) in rec.answers
            }
        return self._lookup[template.hash]

    async def complete(self, messages: Messages, n: int, options: GenerationOptions) -> Completion:
        self.calls += 1
        tokens_in = estimate_message_tokens(messages)
        self.tokens_in += tokens_in
        template = self._template_of(messages)
        cell = self._cells(template).get(_digest(messages))
        if cell is None:
            raise RecordingMissing(
                f"no recorded judgment of {self.recording.judge} for this request "
                f"(prompt and answers not in the recording)"
            )
        key = (template.hash, cell)
        first = self._served.get(key, self.recording.next_index.get(key, 0))
        self._served[key] = first + n
        recorded = self.recording.samples[cell]
        dataset, prompt_id, model_a, model_b = cell
        where = f"{dataset}/{prompt_id} {model_a} vs {model_b}"
        if first + n > len(recorded):
            raise RecordingMissing(
                f"{self.recording.judge} recorded {len(recorded)} sample(s) of {where}; "
                f"asked for sample {first + n - 1}"
            )
        texts, tokens_out = [], 0
        for sample in recorded[first : first + n]:
            raw = sample.raw_text or ""
            if sample.score is None:
                texts.append(raw)  # recorded as unparseable: replayed as such
            else:
                label = label_for(template, sample.score, sample.verdict)
                if label is None:
                    raise RecordingMissing(
                        f"{where}: recorded score {sample.score} has no label in template {template.name}"
                    )
                texts.append(f"{raw}\n\n[[{label}]]" if raw else f"[[{label}]]")
            tokens_out += sample.tokens_out if sample.tokens_out is not None else estimate_tokens(texts[-1])
        self.tokens_out += tokens_out
        return Completion(texts=tuple(texts), tokens_in=tokens_in, tokens_out=tokens_out)

    def status_of(self, exc: BaseException) -> int | None:
        return None

    def is_network_error(self, exc: BaseException) -> bool:
        return False


def make_replay_provider(spec: JudgeSpec) -> ReplayProvider:
    """The replay provider of `recorded:<judge>[@DB]` (DB: the warehouse file, default as `warehouse.connect`)."""
    return ReplayProvider(spec, load_recording(spec.base_url, spec.model, spec.judge_id))
