"""Reading the sources: both arena-hard layouts, the bundled seeds (and rebuilding them), validation."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from ingest_inputs import answer_text, write_arena_dir

from eqarena.datasets.arena_hard import read_arena_hard
from eqarena.datasets.bundled import SEEDS_DIR, read_bundle, seed_names
from eqarena.datasets.records import DatasetError, model_family


@pytest.fixture(scope="module")
def arena(source_data) -> Path:
    """The original arena-hard-v0.1 files, in both layouts."""
    return source_data / "arena_hard_v0.1"


def source_answers(layout_dir: Path) -> dict[tuple[str, str], str]:
    """(prompt_id, model) -> answer text, read straight from the JSON files."""
    out = {}
    for path in sorted((layout_dir / "model_answer").glob("*.jsonl")):
        for raw in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(raw)
            if "uid" in row:
                out[(row["uid"], row["model"])] = row["messages"][-1]["content"]["answer"]
            else:
                out[(row["question_id"], row["model_id"])] = row["choices"][0]["turns"][0]["content"]
    return out


def source_prompts(layout_dir: Path) -> dict[str, str]:
    out = {}
    for raw in (layout_dir / "question.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(raw)
        out[row.get("uid", row.get("question_id"))] = row["prompt"] if "prompt" in row else row["turns"][0]["content"]
    return out


@pytest.mark.parametrize(
    "layout, models",
    [
        ("new_format", {"gpt-3.5-turbo-0125", "gpt-4-0314", "gpt-4-0613"}),
        (
            "old_format",
            {
                "gpt-4-0314",
                "gpt-4o-2024-05-13",
                "claude-3-haiku-20240307",
                "llama-3-8b-instruct",
                "mixtral-8x7b-instruct-v0.1",
                "gemma-2b-it",
            },
        ),
    ],
)
def test_arena_hard_layout_read_verbatim(layout, models, arena):
    data = read_arena_hard(arena / layout, "arena-hard-v0.1")
    assert len(data.prompts) == 500
    assert set(data.models) == models
    assert len(data.responses) == 500 * len(models)
    assert {p.prompt_id: p.text for p in data.prompts} == source_prompts(arena / layout)
    assert {(r.prompt_id, r.model_id): r.text for r in data.responses} == source_answers(arena / layout)
    assert all(p.category == "arena-hard-v0.1" and p.cluster for p in data.prompts)
    assert all(r.response_id for r in data.responses)


def test_layout_is_detected_per_file(tmp_path):
    directory = write_arena_dir(tmp_path / "mixed", question_layout="old", models={"a": "new", "b": "old"})
    data = read_arena_hard(directory, "mixed")
    assert [p.prompt_id for p in data.prompts] == [f"p{i}" for i in range(5)]
    assert {(r.prompt_id, r.model_id): r.text for r in data.responses} == {
        (f"p{i}", m): answer_text(m, f"p{i}") for i in range(5) for m in "ab"
    }


def test_seeds_are_bundled_compact_and_licensed():
    assert seed_names() == ["arena-hard-v0.1", "vicuna80"]
    for name in seed_names():
        directory = SEEDS_DIR / name
        assert list(directory.glob("LICENSE*")), name
        provenance = (directory / "PROVENANCE.md").read_text()
        assert "commit" in provenance
        for path in directory.glob("*.gz"):
            assert path.stat().st_size < 4_000_000, path
    assert "35fb99e5d5c7a2f3535811f1edbe417da7563957" in (SEEDS_DIR / "vicuna80" / "PROVENANCE.md").read_text()
    arena = (SEEDS_DIR / "arena-hard-v0.1" / "PROVENANCE.md").read_text()
    assert "196f6b826783b3da7310e361a805fa36f0be83f3" in arena and "74d985fed4eed51b2dca4dcb37a5753567b43dea" in arena


def test_arena_hard_seed_merges_both_layouts(arena):
    data = read_bundle(SEEDS_DIR / "arena-hard-v0.1")
    assert data.name == "arena-hard-v0.1"
    assert len(data.prompts) == 500 and len(data.models) == 8 and len(data.responses) == 4000
    expected = source_answers(arena / "new_format") | source_answers(arena / "old_format")
    assert len(expected) == 4000  # gpt-4-0314: same key (and text) in both layouts
    assert {(r.prompt_id, r.model_id): r.text for r in data.responses} == expected
    assert {p.prompt_id: p.text for p in data.prompts} == source_prompts(arena / "old_format")


def test_seed_rebuild_is_byte_identical(tmp_path, source_data):
    from eqarena.datasets import build_seeds

    build_seeds.build(source_data, tmp_path)
    for name in seed_names():
        committed = sorted(p.name for p in (SEEDS_DIR / name).iterdir())
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == committed
        for file in committed:
            assert (tmp_path / name / file).read_bytes() == (SEEDS_DIR / name / file).read_bytes(), (name, file)


@pytest.mark.parametrize(
    "folder, licence",
    [("prd_vicuna80", "LICENSE.PRD-MIT.txt"), ("arena_hard_v0.1", "LICENSE.arena-hard-auto-Apache-2.0.txt")],
)
def test_source_licences_are_shipped_verbatim(source_data, folder, licence):
    """Each licence inside the source archive is also next to tests/data/SOURCES.md, unchanged."""
    shipped = (REPO_ROOT / "tests" / "data" / licence).read_bytes()
    assert (source_data / folder / licence).read_bytes() == shipped
    assert licence in (REPO_ROOT / "tests" / "data" / "SOURCES.md").read_text(encoding="utf-8")


def test_model_family_is_the_leading_letters():
    assert [
        model_family(m)
        for m in (
            "gpt-4-0314",
            "gpt35",
            "claude-3-haiku-20240307",
            "vicuna-13b",
            "mixtral-8x7b-instruct-v0.1",
            "Llama-3-8b",
        )
    ] == ["gpt", "gpt", "claude", "vicuna", "mixtral", "llama"]


def test_truncated_gzip_names_the_file(tmp_path):
    seed = _copy_seed(tmp_path)
    data = (seed / "responses.jsonl.gz").read_bytes()
    (seed / "responses.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match=r"responses\.jsonl\.gz:\d+: unreadable compressed data"):
        read_bundle(seed)
    with gzip.open(seed / "prompts.jsonl.gz", "wt") as out:
        out.write('{"prompt_id": "1", "text": "x"}\n{"prompt_id": "1", "text": "y"}\n')
    with pytest.raises(DatasetError, match=r"prompts\.jsonl\.gz:2: duplicate prompt '1' \(first at line 1\)"):
        read_bundle(seed)


def _copy_seed(tmp_path: Path, name: str = "vicuna80") -> Path:
    seed = tmp_path / name
    seed.mkdir()
    for file in (SEEDS_DIR / name).iterdir():
        (seed / file.name).write_bytes(file.read_bytes())
    return seed


def _rewrite_first_judgment(seed: Path, **changes) -> None:
    with gzip.open(seed / "judgments.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    lines[0] = json.dumps(json.loads(lines[0]) | changes)
    with gzip.open(seed / "judgments.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"template": "other"}, r"judgments\.jsonl\.gz:1: unknown template 'other' \(not in dataset\.json\)"),
        (
            {"model_b": "gpt5"},
            r"judgments\.jsonl\.gz:1: judgment of model 'gpt5' on prompt '\d+', which has no answer of it",
        ),
        ({"model_b": "bard", "model_a": "bard"}, r"judgments\.jsonl\.gz:1: model_a and model_b are both 'bard'"),
        ({"score": 2}, r"judgments\.jsonl\.gz:1: field score must be in \[-1, 1\], got 2\.0"),
        ({"score": "1"}, r"judgments\.jsonl\.gz:1: field score must be a number, got str"),
        ({"prompt_id": "81"}, r"judgments\.jsonl\.gz:1: unknown prompt '81' \(not in prompts\.jsonl\.gz\)"),
        ({"sample_index": True}, r"judgments\.jsonl\.gz:1: field sample_index must be an integer, got bool"),
    ],
)
def test_bundle_judgments_are_validated(tmp_path, changes, message):
    seed = _copy_seed(tmp_path)
    _rewrite_first_judgment(seed, **changes)
    with pytest.raises(DatasetError, match=message):
        read_bundle(seed)


def test_integer_ids_are_accepted_and_booleans_are_not(tmp_path):
    directory = write_arena_dir(tmp_path / "ints", n_prompts=1, models={})
    (directory / "question.jsonl").write_text('{"question_id": 7, "turns": [{"content": "q"}]}\n')
    assert [p.prompt_id for p in read_arena_hard(directory, "ints").prompts] == ["7"]
    (directory / "question.jsonl").write_text('{"uid": true, "prompt": "q"}\n')
    with pytest.raises(DatasetError, match=r"question\.jsonl:1: field uid must be a string or an integer, got bool"):
        read_arena_hard(directory, "ints")
