"""Importing Chatbot-Arena-style battle logs (JSON, JSONL, CSV or Parquet), the rows FastChat's Elo
analysis reads: `model_a`, `model_b`, `winner` (`model_a`, `model_b`, `tie`, `tie (bothbad)`;
five-label verdicts are accepted too), optional `question_id` and `turn`.

- The prompt of a battle is its `question_id`; for a later turn (`turn` > 1) it is `<question_id>#<turn>`,
  since the judged text differs. Logs without `question_id` put every battle on one prompt, `all`
  (the game is then the plain win-rate matrix).
- The first user message of `conversation_a` (JSON/JSONL) becomes the prompt's text (first turns only).
- Every battle is one judgment by the judge `--judge` (default `battles:<file name>`); the row's other
  scalar fields (the voter, timestamp, language, ...) are kept as its raw text.
- Anonymous battles only, as Chatbot Arena's leaderboard and FastChat's Elo analysis count them: where
  the log has an `anony` column, battles whose voter saw the model names (`anony` false) are left out
  and counted in a note; `named=True` (`import battles --named-battles`) keeps them.
- Prompt labels for `rate --prompt-groups` (table prompt_tags): `language`, `turn` (1, 2, 3+) and, in
  JSON / JSONL logs, each true tag of Chatbot Arena's nested `category_tag` (`category_tags`). Repeated battles of the
  same pair on the same prompt are samples 0, 1, ... in file order.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from eqarena.datasets.records import DatasetError, tag_frame
from eqarena.importers.pairwise import scalar_json, to_dataset, with_scores
from eqarena.importers.result import Imported
from eqarena.importers.tables import fail_where, numeric_column, read_table, require_columns, text_column

TEMPLATE_TAG = "battle"
POOLED_PROMPT = "all"


HARD_CRITERIA = 6  # a prompt meeting this many of criteria_v0.1's 7 criteria is a hard prompt (Chatbot Arena)


def category_tags(tags) -> list[str]:
    """The true tags of Chatbot Arena's nested `category_tag` as `<family>/<tag>` (e.g. 'math_v0.1/math',
    'if_v0.1/if', 'criteria_v0.1/complexity'), plus 'criteria_v0.1/hard' when HARD_CRITERIA or more
    criteria hold (Chatbot Arena's hard prompts). Non-boolean fields (if_v0.1's score) are left out."""
    if not isinstance(tags, dict):
        return []
    out = []
    for family, inner in sorted(tags.items()):
        if not isinstance(inner, dict):
            continue
        true = sorted(k for k, v in inner.items() if v is True)
        out += [f"{family}/{k}" for k in true]
        if family.startswith("criteria") and len(true) >= HARD_CRITERIA:
            out.append(f"{family}/hard")
    return out


def _record(obj: dict) -> dict:
    """A battle's scalar fields plus the first user message as `prompt_text` and its category tags,
    '|'-joined, as `category_tags`."""
    row = {k: v for k, v in obj.items() if v is None or isinstance(v, (str, int, float, bool))}
    if "category_tag" in obj:
        row["category_tags"] = "|".join(category_tags(obj["category_tag"]))
    conversation = obj.get("conversation_a")
    if isinstance(conversation, list):
        for message in conversation:
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
                row["prompt_text"] = message["content"]
                break
    return row


def read_battles(paths: list[Path], name: str | None, judge: str | None, named: bool = False) -> Imported:
    """Every battle of the logs at `paths` as a recorded judgment, the anonymous ones only unless
    `named` (see module docstring)."""
    frames, notes = [], []
    for path in paths:
        frame, pooled = _read_one(path, judge or f"battles:{path.stem}")
        if not named and "anony" in frame.columns:
            frame, note = anonymous_only(frame, path)
            notes += [note] if note else []
        frames.append(frame)
        if pooled:
            notes.append(
                f"{path}: no question_id column; all {frame.height} battles are on one prompt ({POOLED_PROMPT!r})"
            )
    frame = pl.concat(frames, how="diagonal_relaxed")
    dataset = name or paths[0].stem
    data = to_dataset(frame, dataset, ", ".join(map(str, paths)), TEMPLATE_TAG)
    return Imported(replace(data, tags=prompt_tags(frame)), tuple(notes))


_ANONY = {"true": True, "1": True, "false": False, "0": False}


def anonymous_only(frame: pl.DataFrame, path: Path) -> tuple[pl.DataFrame, str | None]:
    """The battles of `frame` whose `anony` is true (bool, or text true/false/1/0), and a note on the
    named ones left out (None if there were none). An `anony` cell that is neither is an error at its
    row; a log of named battles only is refused (there would be nothing to rate)."""
    anony = pl.col("anony")
    if frame.schema["anony"] != pl.Boolean:
        text = anony.cast(pl.Utf8).str.strip_chars().str.to_lowercase()
        fail_where(
            frame,
            anony.is_null() | ~text.is_in(list(_ANONY)),
            lambda r: f"anony must be true or false; got {r['anony']!r}",
        )
        frame = frame.with_columns(text.replace_strict(_ANONY, return_dtype=pl.Boolean).alias("anony"))
    else:
        fail_where(frame, anony.is_null(), lambda r: "anony must be true or false; got an empty cell")
    kept = frame.filter(anony)
    named = frame.height - kept.height
    if not named:
        return kept, None
    if not kept.height:
        raise DatasetError(
            f"{path}: all {named:,} battles are named (anony false): the voters saw the models' names; "
            "import them with --named-battles"
        )
    return kept, (
        f"{path}: {kept.height:,} anonymous battles imported, {named:,} named ones (anony false) left out, as "
        "Chatbot Arena's leaderboard does; --named-battles keeps them"
    )


def prompt_tags(frame: pl.DataFrame) -> pl.DataFrame:
    """(prompt_id, grouping, tag) of the battles' `language`, `turn` (1, 2, 3+) and `category_tags`, each
    distinct label of a prompt once (table prompt_tags; `rate --prompt-groups language|turn|tag`)."""
    parts = []
    if "language" in frame.columns:
        parts.append(
            frame.select(
                "prompt_id",
                pl.lit("language").alias("grouping"),
                pl.col("language").cast(pl.Utf8).str.strip_chars().alias("tag"),
            )
        )
    if "turn" in frame.columns:
        turn = pl.col("turn").cast(pl.Int64)
        parts.append(
            frame.select(
                "prompt_id",
                pl.lit("turn").alias("grouping"),
                pl.when(turn >= 3).then(pl.lit("3+")).otherwise(turn.cast(pl.Utf8)).alias("tag"),
            )
        )
    if "category_tags" in frame.columns:
        parts.append(
            frame.select(
                "prompt_id",
                pl.lit("tag").alias("grouping"),
                pl.col("category_tags").cast(pl.Utf8).str.split("|").alias("tag"),
            ).explode("tag")
        )
    if not parts:
        return tag_frame()
    tags = pl.concat(parts).filter(pl.col("tag").is_not_null() & (pl.col("tag") != ""))
    return tags.unique(maintain_order=True).sort("prompt_id", "grouping", "tag")


def _read_one(path: Path, judge: str) -> tuple[pl.DataFrame, bool]:
    frame = read_table(path, _record)
    require_columns(frame, path, ["model_a", "model_b", "winner"])
    raw = scalar_json(frame, {"model_a", "model_b", "prompt_text"})
    for column in ("model_a", "model_b"):
        frame = text_column(frame, column)
    pooled = "question_id" not in frame.columns
    if pooled:
        frame = frame.with_columns(pl.lit(POOLED_PROMPT).alias("prompt_id"))
    else:
        frame = text_column(frame, "question_id").with_columns(pl.col("question_id").alias("prompt_id"))
    if "turn" in frame.columns:
        frame = numeric_column(frame, "turn", required=False)
        frame = frame.with_columns(
            pl.when(pl.col("turn").is_not_null() & (pl.col("turn") > 1))
            .then(pl.col("prompt_id") + "#" + pl.col("turn").cast(pl.Int64).cast(pl.Utf8))
            .otherwise(pl.col("prompt_id"))
            .alias("prompt_id")
        )
    frame = with_scores(frame.drop("score", "verdict", strict=False).with_columns(pl.col("winner").alias("verdict")))
    text = pl.col("prompt_text").cast(pl.Utf8) if "prompt_text" in frame.columns else pl.lit(None, pl.Utf8)
    if "turn" in frame.columns:
        text = pl.when(pl.col("turn").is_null() | (pl.col("turn") <= 1)).then(text).otherwise(None)
    return frame.with_columns(pl.lit(judge).alias("judge"), text.alias("prompt_text"), raw), pooled
