"""Import bounds (importers/limits.py): binary content, too many models, over-long names and texts are
refused with one error naming the file (and line) or the field, the bound and the option that raises it;
within the bounds (or with them raised) the same files import."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from eqarena.datasets.records import DatasetError
from eqarena.importers.limits import _CHUNK, refuse_binary
from eqarena.options import ImportOptions, InputLimits, OptionError
from eqarena.tasks.importing import read_import

pytestmark = pytest.mark.unit


def _pairwise(path: Path, models: list[str], text: str = "a prompt") -> Path:
    rows = [f"p{k},{a},{b},1,{text}" for k in range(3) for a, b in zip(models, models[1:])]
    path.write_text("prompt_id,model_a,model_b,score,prompt_text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _wide(path: Path, models: int) -> Path:
    header = "prompt_id," + ",".join(f"m{i}" for i in range(models))
    rows = [f"p{k}," + ",".join("0.5" for _ in range(models)) for k in range(3)]
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_a_nul_byte_names_its_line_and_byte(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"prompt_id,model_a,model_b,score\np1,a,b,1\np2,a,\x00b,1\n")
    with pytest.raises(DatasetError, match=r"t\.csv:3: binary content \(a NUL byte at byte 46\)"):
        read_import(ImportOptions(fmt="pairwise", paths=(str(path),)))


def test_a_nul_byte_past_the_first_chunk_is_found_in_bounded_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    line = json.dumps({"question_id": "q", "model_a": "a", "model_b": "b", "winner": "model_a"}) + "\n"
    count = 4 * _CHUNK // len(line)
    with open(path, "w", encoding="utf-8") as out:
        out.write(line * count)
        out.write('{"question_id": "\x00"}\n')
    tracemalloc.start()
    with pytest.raises(DatasetError, match=rf"big\.jsonl:{count + 1}: binary content"):
        refuse_binary(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * _CHUNK < path.stat().st_size  # a chunk or two at a time, not the file


def test_a_wide_table_over_the_model_bound_is_refused_before_its_cells_are_read(tmp_path):
    path = _wide(tmp_path / "wide.csv", 12)
    with pytest.raises(DatasetError, match=r"wide\.csv \(a column per model\): 12 models, more than --max-models 10"):
        read_import(ImportOptions(fmt="scores", paths=(str(path),), limits=InputLimits(models=10)))
    imported = read_import(ImportOptions(fmt="scores", paths=(str(path),), limits=InputLimits(models=12)))
    assert len(imported.dataset.models) == 12


def test_preference_columns_count_the_baseline(tmp_path):
    path = tmp_path / "prefs.csv"
    path.write_text("prompt_id,x,y,z\np1,1.5,1.2,1.9\n", encoding="utf-8")
    options = dict(fmt="pairwise", paths=(str(path),), layout="preferences", baseline="base")
    with pytest.raises(DatasetError, match="4 models, more than --max-models 3"):
        read_import(ImportOptions(**options, limits=InputLimits(models=3)))
    assert len(read_import(ImportOptions(**options, limits=InputLimits(models=4))).dataset.models) == 4


def test_a_long_table_over_the_model_bound_is_refused(tmp_path):
    path = _pairwise(tmp_path / "long.csv", [f"m{i}" for i in range(6)])
    with pytest.raises(DatasetError, match="6 models, more than --max-models 5"):
        read_import(ImportOptions(fmt="pairwise", paths=(str(path),), limits=InputLimits(models=5)))


@pytest.mark.parametrize(
    "what, models, text, limits, message",
    [
        ("model name", ["a" * 201, "b"], "t", InputLimits(), "a model name of 201 characters"),
        ("prompt text", ["a", "b"], "x" * 101, InputLimits(text_chars=100), "a prompt text of 101 characters"),
    ],
)
def test_over_long_values_name_the_field_and_the_option(tmp_path, what, models, text, limits, message):
    path = _pairwise(tmp_path / "t.csv", models, text)
    option = "--max-name-chars" if what == "model name" else "--max-text-chars"
    with pytest.raises(DatasetError, match=rf"t\.csv: {message} .*more than {option}") as refused:
        read_import(ImportOptions(fmt="pairwise", paths=(str(path),), limits=limits))
    assert len(str(refused.value)) < 300  # the value is cut in the message
    raised = InputLimits(name_chars=1000, text_chars=1000)
    assert read_import(ImportOptions(fmt="pairwise", paths=(str(path),), limits=raised)).dataset.models


def test_control_characters_of_an_over_long_name_are_escaped(tmp_path):
    path = _pairwise(tmp_path / "t.csv", ["\x1b[31m" + "a" * 300, "b"])
    with pytest.raises(DatasetError) as refused:
        read_import(ImportOptions(fmt="pairwise", paths=(str(path),)))
    assert "\x1b" not in str(refused.value) and "\\x1b[31m" in str(refused.value)


def test_bounds_below_their_minimum_are_option_errors():
    with pytest.raises(OptionError, match="--max-models must be at least 2"):
        InputLimits(models=1)


def test_ingest_of_an_arena_hard_folder_keeps_to_the_same_bounds(tmp_path):
    """`eqarena ingest` reads folders too: an over-long prompt is refused there as on import, naming the
    bound and its option, and the folder ingests with the bound raised."""
    from ingest_inputs import question_record, write_arena_dir, write_jsonl

    from eqarena.tasks.ingest import read_dataset

    root = write_arena_dir(tmp_path / "hostile", n_prompts=3)
    long_prompt = "x" * 2_001
    write_jsonl(root / "question.jsonl", [question_record("new", f"p{i}", long_prompt) for i in range(3)])
    with pytest.raises(
        DatasetError, match=r"a prompt text of 2,001 characters \('xxx.*more than --max-text-chars 2,000"
    ):
        read_dataset(str(root), limits=InputLimits(text_chars=2_000))
    data = read_dataset(str(root), limits=InputLimits(text_chars=2_001))
    assert {len(p.text) for p in data.prompts} == {2_001}
    with pytest.raises(DatasetError, match=r"3 models, more than --max-models 2"):
        read_dataset(
            str(write_arena_dir(tmp_path / "three", models=dict.fromkeys("abc", "new"))), limits=InputLimits(models=2)
        )
