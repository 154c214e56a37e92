"""Bundled datasets: the compact format of `eqarena/datasets/seeds/<name>/` (reading, validating, writing).

A bundle directory holds
- `dataset.json`: name, description, licence and provenance files, and the judge templates
  (`{"templates": {template_id: file}}`; a template's hash is the sha256 of that file's bytes);
- `prompts.jsonl.gz`: `prompt_id`, `text`, `category`, `cluster`;
- `responses.jsonl.gz`: `prompt_id`, `model_id`, `text`, `response_id`;
- `judgments.jsonl.gz` (optional): `judge`, `template` (a template_id), `prompt_id`, `model_a`,
  `model_b`, `sample_index`, `verdict`, `score` (from model_a's side, in [-1, 1]), `raw_text`.
Gzip members are written with mtime 0, so rebuilding from the same sources gives identical bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

from eqarena.datasets.records import (
    Dataset,
    DatasetError,
    Line,
    Progress,
    Prompt,
    RecordedJudgment,
    Response,
    check_unique,
    json_error,
    judgment_frame,
    read_jsonl,
)

SEEDS_DIR = Path(__file__).resolve().parent / "seeds"
MANIFEST = "dataset.json"
PROMPTS_FILE = "prompts.jsonl.gz"
RESPONSES_FILE = "responses.jsonl.gz"
JUDGMENTS_FILE = "judgments.jsonl.gz"


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str
    licence: str
    provenance: str
    templates: dict[str, str]  # template_id -> file name inside the bundle


def seed_names() -> list[str]:
    """Names of the datasets bundled in eqarena/datasets/seeds/."""
    return sorted(p.parent.name for p in SEEDS_DIR.glob(f"*/{MANIFEST}"))


def seed_dir(name: str) -> Path | None:
    """The bundle directory of a bundled dataset, or None when `name` is not one."""
    path = SEEDS_DIR / name
    return path if (path / MANIFEST).is_file() else None


def is_bundle_dir(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def bundle_files(directory: Path) -> list[Path]:
    return [directory / f for f in (PROMPTS_FILE, RESPONSES_FILE, JUDGMENTS_FILE) if (directory / f).is_file()]


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: malformed JSON ({json_error(exc)})") from None
    line = Line(path, 1, data if isinstance(data, dict) else {})
    templates = line.get("templates", kind=dict, required=False) or {}
    return Manifest(
        name=line.get("name"),
        description=line.get("description", required=False) or "",
        licence=line.get("licence", required=False) or "",
        provenance=line.get("provenance", required=False) or "",
        templates={str(k): str(v) for k, v in templates.items()},
    )


def template_hash(path: Path) -> str:
    """Content hash of a judge template file: sha256 of its bytes (hex)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_bundle(directory: Path, name: str | None = None, progress: Progress | None = None) -> Dataset:
    """A bundled dataset, validated like any other input (errors name file:line)."""
    manifest = read_manifest(directory)
    hashes = {}
    for template_id, file in manifest.templates.items():
        if not (directory / file).is_file():
            raise DatasetError(f"{directory / MANIFEST}: template {template_id!r}: no file {file}")
        hashes[template_id] = template_hash(directory / file)
    name = name or manifest.name

    prompts: list[Prompt] = []
    seen_prompts: dict[str, Line] = {}
    for line in read_jsonl(directory / PROMPTS_FILE, progress):
        prompt = Prompt(
            prompt_id=line.get_id("prompt_id"),
            text=line.get("text"),
            category=line.get("category", required=False),
            cluster=line.get("cluster", required=False),
        )
        check_unique(seen_prompts, prompt.prompt_id, line, f"prompt {prompt.prompt_id!r}")
        prompts.append(prompt)

    responses: list[Response] = []
    seen_responses: dict[tuple[str, str], Line] = {}
    responses_file = directory / RESPONSES_FILE
    if responses_file.is_file():
        for line in read_jsonl(responses_file, progress):
            response = Response(
                prompt_id=line.get_id("prompt_id"),
                model_id=line.get("model_id"),
                text=line.get("text"),
                response_id=line.get_id("response_id", required=False),
            )
            _check_prompt(line, response.prompt_id, seen_prompts)
            check_unique(
                seen_responses,
                (response.prompt_id, response.model_id),
                line,
                f"answer of model {response.model_id!r} to prompt {response.prompt_id!r}",
            )
            responses.append(response)

    judgments: list[RecordedJudgment] = []
    judgments_file = directory / JUDGMENTS_FILE
    if judgments_file.is_file():
        seen_judgments: dict[tuple, Line] = {}
        for line in read_jsonl(judgments_file, progress):
            template_id = line.get("template")
            if template_id not in hashes:
                raise line.error(f"unknown template {template_id!r} (not in {MANIFEST})")
            judgment = RecordedJudgment(
                judge=line.get("judge"),
                template_hash=hashes[template_id],
                prompt_id=line.get_id("prompt_id"),
                model_a=line.get("model_a"),
                model_b=line.get("model_b"),
                sample_index=line.get("sample_index", kind=int),
                verdict=line.get("verdict"),
                score=line.get("score", kind=float),
                raw_text=line.get("raw_text", required=False),
            )
            _check_judgment(line, judgment, seen_prompts, seen_responses)
            key = (
                judgment.judge,
                template_id,
                judgment.prompt_id,
                judgment.model_a,
                judgment.model_b,
                judgment.sample_index,
            )
            check_unique(seen_judgments, key, line, "judgment " + "/".join(map(str, key)))
            judgments.append(judgment)

    return Dataset(
        name=name,
        source=str(directory),
        prompts=tuple(prompts),
        responses=tuple(responses),
        judgments=judgment_frame(judgments),
    )


def _check_prompt(line: Line, prompt_id: str, prompts: dict[str, Line]) -> None:
    if prompt_id not in prompts:
        raise line.error(f"unknown prompt {prompt_id!r} (not in {PROMPTS_FILE})")


def _check_judgment(line: Line, j: RecordedJudgment, prompts: dict, responses: dict) -> None:
    _check_prompt(line, j.prompt_id, prompts)
    for model in (j.model_a, j.model_b):
        if (j.prompt_id, model) not in responses:
            raise line.error(f"judgment of model {model!r} on prompt {j.prompt_id!r}, which has no answer of it")
    if j.model_a == j.model_b:
        raise line.error(f"model_a and model_b are both {j.model_a!r}")
    if not -1.0 <= j.score <= 1.0:
        raise line.error(f"field score must be in [-1, 1], got {j.score}")
    if j.sample_index < 0:
        raise line.error(f"field sample_index must be >= 0, got {j.sample_index}")


def write_bundle(directory: Path, dataset: Dataset, manifest: Manifest) -> list[Path]:
    """Write `dataset` as a bundle (the template files named in the manifest must already be there).

    Returns the files written. Judgments' template hashes must be those of the manifest's templates.
    """
    directory.mkdir(parents=True, exist_ok=True)
    template_ids = {template_hash(directory / f): t for t, f in manifest.templates.items()}
    body = {
        "name": manifest.name,
        "description": manifest.description,
        "licence": manifest.licence,
        "provenance": manifest.provenance,
        "templates": manifest.templates,
    }
    (directory / MANIFEST).write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written = [directory / MANIFEST]
    written.append(
        _write_gz(
            directory / PROMPTS_FILE,
            (
                {"prompt_id": p.prompt_id, "text": p.text, "category": p.category, "cluster": p.cluster}
                for p in dataset.prompts
            ),
        )
    )
    written.append(
        _write_gz(
            directory / RESPONSES_FILE,
            (
                {"prompt_id": r.prompt_id, "model_id": r.model_id, "text": r.text, "response_id": r.response_id}
                for r in dataset.responses
            ),
        )
    )
    if dataset.judgments.height:
        written.append(
            _write_gz(
                directory / JUDGMENTS_FILE,
                (
                    {
                        "judge": j["judge"],
                        "template": template_ids[j["template_hash"]],
                        "prompt_id": j["prompt_id"],
                        "model_a": j["model_a"],
                        "model_b": j["model_b"],
                        "sample_index": j["sample_index"],
                        "verdict": j["verdict"],
                        "score": j["score"],
                        "raw_text": j["raw_text"],
                    }
                    for j in dataset.judgments.iter_rows(named=True)
                ),
            )
        )
    return written


def _write_gz(path: Path, rows) -> Path:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz:
        for row in rows:
            gz.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    path.write_bytes(buffer.getvalue())
    return path
