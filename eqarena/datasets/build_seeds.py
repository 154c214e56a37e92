"""Rebuild the bundled datasets in eqarena/datasets/seeds/ from the original files.

    uv run python eqarena/datasets/build_seeds.py --data tests/data/sources.tar.xz [--out eqarena/datasets/seeds]

`--data` is a folder holding `prd_vicuna80/` and `arena_hard_v0.1/` exactly as copied from their
repositories (see each seed's PROVENANCE.md and tests/data/SOURCES.md), or a `.tar.xz` archive of
such a folder (tests/data/sources.tar.xz), extracted to a temporary folder first. The output is
byte-for-byte reproducible.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from eqarena.datasets.arena_hard import read_arena_hard
from eqarena.datasets.bundled import Manifest, template_hash, write_bundle
from eqarena.datasets.records import (
    Dataset,
    DatasetError,
    Line,
    Prompt,
    RecordedJudgment,
    Response,
    check_unique,
    judgment_frame,
    read_jsonl,
)

SEEDS_DIR = Path(__file__).resolve().parent / "seeds"

PRD_MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")
PRD_JUDGES = ("gpt4", "claude", "gpt35", "bard", "vicuna-13b")
PRD_TEMPLATE_ID = "prd-threeclass"
PRD_TEMPLATE_FILE = "judge_template.prd-threeclass.jsonl"
# PRD three-class score -> (verdict, score for assistant 1 = model_a): 1 = assistant 1 better,
# 2 = assistant 2 better, 3 = tie.
PRD_SCORES = {1: ("A>B", 1.0), 2: ("B>A", -1.0), 3: ("A=B", 0.0)}
# answer_{M1}-vs-answer_{M2}-{judge}-reviewer[_-]threeclass.jsonl (vicuna-13b: ...-reviewer.jsonl).
# The duplicate gpt35 run is named answer-gpt35-vs-answer-gpt4-... (hyphens) and does not match.
_PRD_RATING_FILE = re.compile(
    r"^answer_(?P<a>{m})-vs-answer_(?P<b>{m})-(?P<judge>{j})-reviewer(?:[_-]threeclass)?\.jsonl$".format(
        m="|".join(map(re.escape, PRD_MODELS)), j="|".join(map(re.escape, PRD_JUDGES))
    )
)

PRD_PROVENANCE = """# vicuna80 — provenance

Source: https://github.com/bcdnlp/PRD, commit 35fb99e5d5c7a2f3535811f1edbe417da7563957, `data/vicuna80/`
(Li et al. 2023, "PRD: Peer Rank and Discussion Improve Large Language Model based Evaluations").
Licence: MIT, `LICENSE.PRD-MIT.txt` (copied verbatim).

Built by `eqarena/datasets/build_seeds.py` from:
- `vicuna_questions.jsonl` -> `prompts.jsonl.gz` (80 questions; prompt_id = question_id).
- `generations/answer_{bard,claude,gpt35,gpt4,vicuna-13b}.jsonl` -> `responses.jsonl.gz` (400 answers;
  model_id = the name in the file name; response_id = answer_id).
- `ratings-{gpt4,claude,gpt35,bard,vicuna-13b}/answer_{M1}-vs-answer_{M2}-{judge}-reviewer*.jsonl` ->
  `judgments.jsonl.gz`: 5 LLM judges (judge ids prd:gpt4, prd:claude, prd:gpt35, prd:bard,
  prd:vicuna-13b) x 20 ordered model pairs x 80 questions = 8,000 judgments, one sample per order.
  model_a = M1, the answer shown as Assistant 1 (checked against answer1_id / answer2_id on every
  row). PRD score 1 (Assistant 1 better) -> verdict A>B, score +1; 2 (Assistant 2 better) -> B>A, -1;
  3 (tie) -> A=B, 0. raw_text = the judge's review text. The two files
  `ratings-gpt35/answer-gpt35-vs-answer-gpt4-...` and `answer-gpt4-vs-answer-gpt35-...` (a duplicate
  run of one pair) are left out; the human ratings (`ratings-human/`) are not included.
- `vicuna_prompt_threeclass.jsonl` -> `judge_template.prd-threeclass.jsonl` (verbatim): the
  three-class judge template the ratings were made with; every judgment's template_hash is the
  sha256 of this file.
The answers include outputs of commercial models (Bard, Claude, GPT-3.5, GPT-4).
"""

ARENA_PROVENANCE = """# arena-hard-v0.1 — provenance

Licence: Apache-2.0, `LICENSE.arena-hard-auto-Apache-2.0.txt` (copied verbatim).
Built by `eqarena/datasets/build_seeds.py` from two copies of arena-hard-v0.1, in the two layouts:
- new layout: https://github.com/lmarena/arena-hard-auto, commit
  196f6b826783b3da7310e361a805fa36f0be83f3, `data/arena-hard-v0.1/question.jsonl` and
  `model_answer/{gpt-3.5-turbo-0125,gpt-4-0314,gpt-4-0613}.jsonl`;
- old layout: https://github.com/meltemi-ai/arena-hard-auto-english (a fork), commit
  74d985fed4eed51b2dca4dcb37a5753567b43dea, the same 500 questions and
  `model_answer/{gpt-4-0314,gpt-4o-2024-05-13,claude-3-haiku-20240307,llama-3-8b-instruct,
  mixtral-8x7b-instruct-v0.1,gemma-2b-it}.jsonl`.
The questions of both copies are identical (checked); `prompts.jsonl.gz` holds the 500 (prompt_id =
uid). `responses.jsonl.gz` holds every answer file of both, merged: 8 models x 500 = 4,000 answers
(the gpt-4-0314 answers appear in both copies, identical, and are kept once; response_id = ans_id /
answer_id). No judgments.
"""


def build_vicuna80(prd: Path, out: Path) -> Dataset:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(prd / "prompts" / "vicuna_prompt_threeclass.jsonl", out / PRD_TEMPLATE_FILE)
    shutil.copyfile(prd / "LICENSE.PRD-MIT.txt", out / "LICENSE.PRD-MIT.txt")
    (out / "PROVENANCE.md").write_text(PRD_PROVENANCE, encoding="utf-8")
    template = template_hash(out / PRD_TEMPLATE_FILE)

    prompts, seen = [], {}
    for line in read_jsonl(prd / "prompts" / "vicuna_questions.jsonl"):
        prompt = Prompt(
            prompt_id=line.get_id("question_id"), text=line.get("text"), category=line.get("category", required=False)
        )
        check_unique(seen, prompt.prompt_id, line, f"question {prompt.prompt_id}")
        prompts.append(prompt)

    responses, answer_of = [], {}
    for model in PRD_MODELS:
        for line in read_jsonl(prd / "generations" / f"answer_{model}.jsonl"):
            response = Response(
                prompt_id=line.get_id("question_id"),
                model_id=model,
                text=line.get("text"),
                response_id=line.get_id("answer_id"),
            )
            if response.prompt_id not in seen:
                raise line.error(f"answer for unknown question {response.prompt_id}")
            answer_of[response.response_id] = (model, response.prompt_id)
            responses.append(response)

    judgments, keys = [], {}
    for judge in PRD_JUDGES:
        for path in sorted((prd / f"ratings-{judge}").glob("*.jsonl")):
            match = _PRD_RATING_FILE.match(path.name)
            if match is None:
                continue  # the duplicate gpt35 run (answer-...-vs-answer-... file names)
            if match["judge"] != judge:
                raise DatasetError(f"{path}: judge {match['judge']!r} in the name of a ratings-{judge} file")
            for line in read_jsonl(path):
                judgments.append(_prd_judgment(line, judge, match["a"], match["b"], template, answer_of, keys))
    return Dataset(
        name="vicuna80",
        source=str(prd),
        prompts=tuple(prompts),
        responses=tuple(responses),
        judgments=judgment_frame(judgments),
    )


def _prd_judgment(
    line: Line, judge: str, model_a: str, model_b: str, template: str, answer_of: dict, keys: dict
) -> RecordedJudgment:
    prompt_id = line.get_id("question_id")
    for field, model in (("answer1_id", model_a), ("answer2_id", model_b)):
        if answer_of.get(line.get_id(field)) != (model, prompt_id):
            raise line.error(f"{field} is not {model}'s answer to question {prompt_id}")
    score = line.get("score", kind=int)
    if score not in PRD_SCORES:
        raise line.error(f"field score must be 1, 2 or 3, got {score}")
    check_unique(keys, (judge, prompt_id, model_a, model_b), line, "rating of this pair and question")
    verdict, value = PRD_SCORES[score]
    return RecordedJudgment(
        judge=f"prd:{judge}",
        template_hash=template,
        prompt_id=prompt_id,
        model_a=model_a,
        model_b=model_b,
        sample_index=0,
        verdict=verdict,
        score=value,
        raw_text=line.get("text"),
    )


def build_arena_hard(arena: Path, out: Path) -> Dataset:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(arena / "LICENSE.arena-hard-auto-Apache-2.0.txt", out / "LICENSE.arena-hard-auto-Apache-2.0.txt")
    (out / "PROVENANCE.md").write_text(ARENA_PROVENANCE, encoding="utf-8")
    name = "arena-hard-v0.1"
    new = read_arena_hard(arena / "new_format", name)
    old = read_arena_hard(arena / "old_format", name)
    if new.prompts != old.prompts:
        raise DatasetError(f"{arena}: the questions of new_format and old_format differ")
    merged: dict[tuple[str, str], Response] = {}
    for response in (*new.responses, *old.responses):
        key = (response.prompt_id, response.model_id)
        if merged.setdefault(key, response) != response:
            raise DatasetError(f"{arena}: two different answers of {key[1]} to prompt {key[0]}")
    return Dataset(name=name, source=str(arena), prompts=new.prompts, responses=tuple(merged.values()))


def build(data: Path, out: Path) -> list[Path]:
    """Build both bundled datasets from `data` into `out`; returns the files written."""
    written = []
    vicuna = build_vicuna80(data / "prd_vicuna80", out / "vicuna80")
    written += write_bundle(
        out / "vicuna80",
        vicuna,
        Manifest(
            name="vicuna80",
            description="PRD Vicuna-80: 80 questions, answers of 5 models, three-class ratings of all 20 "
            "ordered model pairs by 5 LLM judges",
            licence="LICENSE.PRD-MIT.txt",
            provenance="PROVENANCE.md",
            templates={PRD_TEMPLATE_ID: PRD_TEMPLATE_FILE},
        ),
    )
    arena = build_arena_hard(data / "arena_hard_v0.1", out / "arena-hard-v0.1")
    written += write_bundle(
        out / "arena-hard-v0.1",
        arena,
        Manifest(
            name="arena-hard-v0.1",
            description="arena-hard-v0.1: 500 prompts and the answers of 8 models",
            licence="LICENSE.arena-hard-auto-Apache-2.0.txt",
            provenance="PROVENANCE.md",
            templates={},
        ),
    )
    return written


def build_from(data: Path, out: Path) -> list[Path]:
    """`build`, with `data` either the source folder or a .tar.xz archive of it."""
    if data.is_dir():
        return build(data, out)
    if not (data.is_file() and data.name.endswith(".tar.xz")):
        raise DatasetError(f"{data}: not a folder or a .tar.xz archive")
    with tempfile.TemporaryDirectory(prefix="eqarena-sources-") as folder:
        with tarfile.open(data, "r:xz") as archive:
            archive.extractall(folder, filter="data")
        return build(Path(folder), out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="folder with prd_vicuna80/ and arena_hard_v0.1/, or a .tar.xz archive of one",
    )
    parser.add_argument("--out", type=Path, default=SEEDS_DIR, help="where the seed folders are written")
    args = parser.parse_args()
    try:
        written = build_from(args.data, args.out)
    except (DatasetError, FileNotFoundError) as error:
        parser.error(f"--data: {error}")
    for path in written:
        print(f"{path.stat().st_size:>10,d}  {path}")


if __name__ == "__main__":
    main()
