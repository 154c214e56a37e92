"""The provider behind a `--judge` spec: a live LLM (`eqarena.llm.providers`) or, for `recorded:JUDGE[@DB]`,
the replay of stored judgments (`judge/replay.py`)."""

from __future__ import annotations

from eqarena.judge.replay import make_replay_provider
from eqarena.llm.providers import JudgeSpec, Provider, make_provider, parse_judge_spec


def make_judge_provider(spec: JudgeSpec | str, *, timeout_s: float = 120.0, option: str = "--judge") -> Provider:
    """The judge's provider for a spec; raises JudgeSpecError (naming `option`) when the spec is malformed or
    its key is missing."""
    if isinstance(spec, str):
        spec = parse_judge_spec(spec, option)
    if spec.provider == "recorded":
        return make_replay_provider(spec)
    return make_provider(spec, timeout_s=timeout_s, option=option)
