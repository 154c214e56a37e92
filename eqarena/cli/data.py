"""`eqarena ingest` and `eqarena import`: data into the warehouse."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.output import print_changes, say
from eqarena.cli.support import DB_HELP, SOURCE_HELP, WAIT, cli_errors, db_option, options_errors, run_pipeline
from eqarena.exceptions import OptionError
from eqarena.messages import terminal_safe
from eqarena.options import DEFAULT_DATASET, ImportFormat, ImportOptions, IngestOptions, InputLimits

MAX_MODELS = typer.Option(
    InputLimits.models,
    "--max-models",
    help="Refuse data of more models than this (a game's payoff tensor grows with their square).",
)
MAX_NAME_CHARS = typer.Option(
    InputLimits.name_chars, "--max-name-chars", help="Refuse model names and prompt ids longer than this."
)
MAX_TEXT_CHARS = typer.Option(
    InputLimits.text_chars, "--max-text-chars", help="Refuse prompt and answer texts longer than this."
)


@cli_errors()
def ingest(
    source: str = typer.Option(DEFAULT_DATASET, "--dataset", "-d", help=SOURCE_HELP),
    replace: bool = typer.Option(False, "--replace", help="Overwrite stored rows whose content changed."),
    name: Optional[str] = typer.Option(
        None, "--name", help="Dataset name (default: the bundle's name or the directory's name)."
    ),
    max_models: int = MAX_MODELS,
    max_name_chars: int = MAX_NAME_CHARS,
    max_text_chars: int = MAX_TEXT_CHARS,
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Load prompts, answers (and recorded judgments) into the warehouse; idempotent, one transaction."""
    with options_errors():
        limits = InputLimits(models=max_models, name_chars=max_name_chars, text_chars=max_text_chars)
    options = IngestOptions(source=source, name=name, replace=replace, limits=limits)
    from eqarena.pipelines.ingest import ingest as ingest_pipeline

    summary = run_pipeline(ingest_pipeline, options, db_option(db))
    print_changes("ingest", summary)


IMPORT_HELP = """Import judgments or scores made elsewhere (idempotent, one transaction; a bad row
stops the import at its file:line and writes nothing).

FORMAT is one of:

- arena-hard-auto: `model_judgment/<judge>/<model>.jsonl` files (a file, a judge folder or `model_judgment/`);
  both games against the baseline, verdict labels `A>>B` ... `B>>A`, judge `arena-hard-auto:<judge>`.

- battles: Chatbot-Arena battle logs (JSON, JSONL, CSV, Parquet): model_a, model_b, winner, optional
  question_id, turn, language, category_tag; with an `anony` column only the anonymous battles are
  imported, as Chatbot Arena's leaderboard counts them (`--named-battles` keeps the others too).

- pairwise: a long table (CSV, TSV, Parquet, JSONL, JSON): prompt_id, model_a, model_b, score in [-1, 1]
  or verdict, optional judge, sample, prompt_text; a verdict `error` (a failed judge call, as in
  MT-bench's files) is stored as unparsed and counted.
  `--layout preferences --baseline MODEL`: a row per instruction (AlpacaEval), an id column and a column
  per model holding its preference in [1, 2] over MODEL (1 baseline, 2 model, 1.5 tie); each cell is a
  judgment of score 2 * (pref - 1.5) for the model, stored in both orders.

- scores: per-prompt scores; `--layout` long (prompt_id, model, score), wide (prompt_id + a column per
  model; long or wide are told apart by the columns when --layout is not given) or models-by-tasks
  (LiveBench: a `model` column + a column per task, each task a prompt; `--scale 100` for percentages).
  Empty and NaN cells are missing. Payoff of a over b = `clip((s_a - s_b) / scale, -1, 1)` (`--payoff
  sign`: who scored higher).

`--id-column NAME` names the id column of a table (the prompt's, or the model's for models-by-tasks).

Then rate as usual, e.g. `eqarena rate --dataset NAME --missing impute` when pairs are sparse."""


@cli_errors()
def import_data(
    fmt: str = typer.Argument(..., metavar="FORMAT", help="arena-hard-auto | battles | pairwise | scores"),
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Files (or, for arena-hard-auto, folders)."),
    dataset: Optional[str] = typer.Option(
        None,
        "--dataset",
        "-d",
        help="Dataset name (default: the folder "
        "above model_judgment/ for arena-hard-auto, else the first file's name).",
    ),
    judge: Optional[str] = typer.Option(
        None,
        "--judge",
        help="Judge id for battles, pairwise rows without a "
        "judge column, and scores (default: `<format>:<file name>`).",
    ),
    baseline: Optional[str] = typer.Option(
        None,
        "--baseline",
        help="arena-hard-auto v0.1 files: the baseline "
        "model (default gpt-4-0314; v2.0 files name it); pairwise "
        "--layout preferences: the model the columns are compared with.",
    ),
    layout: Optional[str] = typer.Option(
        None,
        "--layout",
        help="scores: long, wide or models-by-tasks "
        "(default: long or wide, by the columns); pairwise: long (default) "
        "or preferences.",
    ),
    id_column: Optional[str] = typer.Option(
        None,
        "--id-column",
        help="pairwise and scores: the id column "
        "(the prompt's; the model's for models-by-tasks) instead of the "
        "usual names (prompt_id, question_id, ...).",
    ),
    payoff: str = typer.Option("clip-diff", "--payoff", help="scores: clip-diff or sign."),
    scale: float = typer.Option(
        1.0, "--scale", help="scores: the score gap that counts as decisive (e.g. 100 for percentages)."
    ),
    replace: bool = typer.Option(False, "--replace", help="Overwrite stored rows whose content changed."),
    named_battles: bool = typer.Option(
        False,
        "--named-battles",
        help="battles: also import the named battles (anony false: the voter saw the models' names), "
        "which Chatbot Arena's leaderboard leaves out.",
    ),
    max_models: int = MAX_MODELS,
    max_name_chars: int = MAX_NAME_CHARS,
    max_text_chars: int = MAX_TEXT_CHARS,
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    with options_errors():
        if fmt not in tuple(ImportFormat):
            raise OptionError(f"FORMAT must be one of {', '.join(f.value for f in ImportFormat)}; got {fmt!r}")
        options = ImportOptions(
            fmt=fmt,
            paths=tuple(str(p) for p in paths),
            dataset=dataset,
            judge=judge,
            baseline=baseline,
            payoff=payoff,
            scale=scale,
            replace=replace,
            layout=layout,
            id_column=id_column,
            named_battles=named_battles,
            limits=InputLimits(models=max_models, name_chars=max_name_chars, text_chars=max_text_chars),
        )
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"{missing[0]}: no such file or directory")
    from eqarena.pipelines.importing import import_data as import_data_pipeline

    result = run_pipeline(import_data_pipeline, options, db_option(db))
    for note in result.notes:
        typer.secho(terminal_safe(f"note: {note}"), fg="yellow", err=True)
    print_changes("import", result.summary)
    say(f"judges: {', '.join(result.judges)}")
