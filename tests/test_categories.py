"""Per-category leaderboards: `rate --category X` rates one category's prompts as a normal run, and
`rate --by category` rates every category on its own beside the unchanged full run, on the real PRD
Vicuna-80 judgments and on a planted synthetic import; skipped categories say why; the report shows them.
The command line runs the pipelines as plain Python (EQARENA_PREFECT=never)."""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app
from tests.conftest import query

PLAIN = {"EQARENA_PREFECT": "never", "COLUMNS": "80"}
VICUNA_CATEGORIES = ("coding", "math", "writing")  # 7, 3 and 10 prompts
METHODS = ("bt", "ne", "cce", "ne-shannon", "cce-shannon")


def eqarena(*args: str) -> str:
    """Run the command line; its output (exit code 0 asserted)."""
    result = CliRunner().invoke(app, list(args), env=PLAIN)
    assert result.exit_code == 0, result.output
    return result.output


def fails(*args: str) -> str:
    """Run the command line expecting a one-line error; that line."""
    result = CliRunner().invoke(app, list(args), env=PLAIN)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("dataset: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def rate(db: str, *args: str) -> tuple[str, str]:
    """`eqarena rate` on `db`: (run id, output)."""
    output = eqarena("rate", "--db", db, *args)
    return re.search(r"run (rate-\S+) written to", output).group(1), output


def king_ratings(db: str, run_id: str) -> dict[tuple[str, str], float]:
    return {
        (m, a): r
        for m, a, r in query(
            db, "SELECT method, action, rating FROM ratings WHERE run_id = ? AND player = 'king'", [run_id]
        )
    }


# ------------------------------------------------------------------------------------- vicuna80


@pytest.fixture(scope="module")
def vicuna(tmp_path_factory):
    """The bundled PRD data with its five judges: a plain run, a --by category run, and a --category run of
    each of VICUNA_CATEGORIES (no bootstrap: the ratings compared do not depend on it)."""
    db = str(tmp_path_factory.mktemp("categories") / "w.duckdb")
    eqarena("ingest", "--dataset", "vicuna80", "--db", db)
    common = ("--dataset", "vicuna80", "-j", "all-prd", "--bootstrap", "0")
    plain, _ = rate(db, *common)
    by, output = rate(db, *common, "--by", "category")
    alone = {c: rate(db, *common, "--category", c)[0] for c in VICUNA_CATEGORIES}
    return db, plain, by, output, alone


def test_per_category_ratings_equal_separate_category_runs(vicuna):
    db, _, by, _, alone = vicuna
    stored = {
        (c, m, x): (r, k)
        for c, m, x, r, k in query(
            db, "SELECT category, method, model_id, rating, rank FROM category_ratings WHERE run_id = ?", [by]
        )
    }
    assert {c for c, _, _ in stored} == {
        "generic",
        "knowledge",
        "roleplay",
        "common-sense",
        "fermi",
        "counterfactual",
        "writing",
        "coding",
        "math",
    }
    for category, run_id in alone.items():
        separate = {
            (m, x): (r, k)
            for m, x, r, k in query(
                db, "SELECT method, action, rating, rank FROM ratings WHERE run_id = ? AND player = 'king'", [run_id]
            )
        }
        assert {m for m, _ in separate} == set(METHODS)
        for (method, model), (rating, rank) in separate.items():
            by_rating, by_rank = stored[(category, method, model)]
            assert by_rating == pytest.approx(rating, abs=1e-9), (category, method, model)
            assert by_rank == rank, (category, method, model)
        assert len([k for k in stored if k[0] == category]) == len(separate)


def test_the_full_run_is_unchanged_by_by(vicuna):
    db, plain, by, _, _ = vicuna
    full, with_groups = (
        {
            (m, p, a): r
            for m, p, a, r in query(db, "SELECT method, player, action, rating FROM ratings WHERE run_id = ?", [run_id])
        }
        for run_id in (plain, by)
    )
    assert full.keys() == with_groups.keys() and len(full) == len(METHODS) * 5 + 4 * (80 + 5)
    for key, rating in full.items():
        assert with_groups[key] == pytest.approx(rating, abs=1e-12), key
    assert query(db, "SELECT count(*) FROM category_ratings WHERE run_id = ?", [plain]) == [(0,)]


def test_a_category_run_is_a_run_of_its_prompts_never_taken_for_the_full_one(vicuna):
    from eqarena.methods import parse_methods
    from eqarena.options import RateOptions
    from eqarena.tasks.rate import rate_parameters
    from eqarena.tasks.refresh import find_current_rate_run, fingerprint_rate_inputs

    db, plain, by, _, alone = vicuna
    coding = alone["coding"]
    assert query(db, "SELECT count(DISTINCT prompt_id) FROM payoffs WHERE run_id = ?", [coding]) == [(7,)]
    runs = {
        r: (json.loads(p), f)
        for r, p, f in query(db, "SELECT run_id, parameters, data_fingerprint FROM runs WHERE kind = 'rate'")
    }
    assert runs[coding][0]["category"] == "coding" and runs[plain][0]["category"] is None
    assert runs[by][0]["by"] == "category" and "by" not in runs[plain][0]
    ours = [plain, by, *alone.values()]
    assert len({runs[r][1] for r in ours}) == 1 + len(alone)  # plain and --by read the same data
    assert dict(query(db, "SELECT run_id, category FROM rate_runs"))[coding] == "coding"

    for category, expected in ((None, {plain, by}), ("coding", {coding})):
        options = RateOptions(dataset="vicuna80", judges=("all-prd",), category=category)
        inputs = fingerprint_rate_inputs.fn(db, options)
        parameters = rate_parameters(options, parse_methods(None), inputs.judges)
        parameters.pop("bootstrap"), parameters.pop("settle")
        assert find_current_rate_run.fn(db, inputs.fingerprint, parameters) in expected


def test_console_prints_each_categorys_ranking_within_80_columns(vicuna):
    db, _, by, output, _ = vicuna
    table = output[output.index("by category: NE ranking") : output.index("written to")]
    table = table[: table.rindex("\n")]  # up to the line naming the run and its (temporary, long) path
    assert max(len(line) for line in table.splitlines()) <= 80
    tops = dict(
        query(
            db,
            "SELECT category, string_agg(model_id, ', ' ORDER BY model_id) FROM category_ratings "
            "WHERE run_id = ? AND method = 'ne' AND rank = 1 GROUP BY category",
            [by],
        )
    )
    for category, top in tops.items():
        row = next(line for line in table.splitlines() if line.startswith(category + " "))
        assert row.split()[2].rstrip(",") == top.split(",")[0], row
    assert "9 of 9 rated separately" in output


def test_a_category_run_bootstraps_and_reports(vicuna, tmp_path):
    db = vicuna[0]
    run_id, output = rate(
        db, "--dataset", "vicuna80", "-j", "prd:gpt4", "--category", "writing", "--bootstrap", "12", "--settle", "0"
    )
    assert "u_king 10 prompts x 5 models" in output
    intervals = query(
        db,
        "SELECT method, count(*) FROM rating_intervals WHERE run_id = ? AND scheme = 'prompts' GROUP BY method",
        [run_id],
    )
    assert dict(intervals) == {m: 5 for m in METHODS if m != "bt"}
    eqarena("report", "--db", db, "--run", run_id, "--out", str(tmp_path))
    html = (tmp_path / f"eqarena-{run_id}.html").read_text(encoding="utf-8")
    assert "<h1>eqarena ratings: vicuna80 (category writing)</h1>" in html
    assert 'id="categories"' not in html


# ------------------------------------------------------------------------------- planted import


def planted_table(path: Path, with_category: bool = True) -> Path:
    """Pairwise judgments of m1, m2, m3 in both orders: m1 beats both others on every 'code' prompt, m2 on
    every 'writing' prompt (m1 second there, m3 last everywhere); one 'misc' prompt; and 'partial', two
    prompts on which m1 and m3 never met."""
    strength = {
        "code": ("m1", "m2", "m3"),
        "writing": ("m2", "m1", "m3"),
        "misc": ("m1", "m2", "m3"),
        "partial": ("m2", "m1", "m3"),
    }
    prompts = [("code", 4), ("writing", 4), ("misc", 1), ("partial", 2)]
    rows = []
    for category, count in prompts:
        order = strength[category]
        for k in range(count):
            prompt = f"{category}-{k}"
            for a in order:
                for b in order:
                    if a == b or (category == "partial" and {a, b} == {"m1", "m3"}):
                        continue
                    score = 1 if order.index(a) < order.index(b) else -1
                    rows.append(
                        {
                            "prompt_id": prompt,
                            "model_a": a,
                            "model_b": b,
                            "score": score,
                            **({"category": category} if with_category else {}),
                        }
                    )
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


class CategorySection(HTMLParser):
    """The report's "By category" table: header cells, and (row name, cells with their class) per row."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.found = False
        self.header: list[str] = []
        self.rows: list[list[tuple[str, str | None]]] = []
        self.skipped: list[str] = []  # the <b> names of the skipped list
        self._cell: list | None = None
        self._bold = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.inside = attrs.get("id") == "categories"
            self.found |= self.inside
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self._cell = ["", attrs.get("class"), tag]
        elif self.inside and tag == "b":
            self._bold = True
            self.skipped.append("")

    def handle_endtag(self, tag):
        if self.inside and tag in ("td", "th") and self._cell is not None:
            text, cls, kind = self._cell
            (self.header if kind == "th" else self.rows[-1]).append((text.strip(), cls))
            self._cell = None
        if tag == "section":
            self.inside = False
        self._bold = self._bold and tag != "b"

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data
        elif self._bold:
            self.skipped[-1] += data


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    db = str(folder / "w.duckdb")
    eqarena("import", "pairwise", str(planted_table(folder / "planted.csv")), "--dataset", "planted", "--db", db)
    run_id, output = rate(
        db, "--dataset", "planted", "--missing", "drop-prompts", "--bootstrap", "0", "--by", "category"
    )
    return db, run_id, output, folder


def test_planted_category_winners_top_their_categories(planted):
    db, run_id, _, _ = planted
    tops = query(
        db,
        "SELECT category, method, string_agg(model_id, ',') FROM category_ratings "
        "WHERE run_id = ? AND rank = 1 GROUP BY ALL ORDER BY ALL",
        [run_id],
    )
    assert {(c, m): t for c, m, t in tops} == {
        **{("code", m): "m1" for m in METHODS},
        **{("writing", m): "m2" for m in METHODS},
    }
    prompts = dict(query(db, "SELECT DISTINCT category, prompts FROM category_ratings WHERE run_id = ?", [run_id]))
    assert prompts == {"code": 4, "writing": 4}


def test_skipped_categories_say_why(planted):
    db, run_id, output, _ = planted
    groups = {
        c: (s, r, n)
        for c, s, r, n in query(
            db, "SELECT category, status, reason, prompts FROM category_groups WHERE run_id = ?", [run_id]
        )
    }
    assert groups["code"][0] == groups["writing"][0] == "rated"
    status, reason, prompts = groups["misc"]
    assert (status, prompts) == ("skipped", 1) and reason.startswith("1 prompt; a category is rated from 2")
    status, reason, prompts = groups["partial"]
    assert (status, prompts) == ("skipped", 2) and "--missing drop-prompts would drop all 2 prompts" in reason
    assert "skipped category 'misc': 1 prompt" in output and "skipped category 'partial'" in output
    assert "2 of 4 rated separately" in output


def test_report_shows_each_categorys_top_and_none_without_by(planted):
    db, run_id, _, folder = planted
    eqarena("report", "--db", db, "--run", run_id, "--out", str(folder / "out"))
    section = CategorySection()
    section.feed((folder / "out" / f"eqarena-{run_id}.html").read_text(encoding="utf-8"))
    assert section.found
    columns = [text for text, _ in section.header]
    assert columns[:2] == ["model", "all prompts"] and columns[2].startswith("code") and "4 prompts" in columns[2]
    assert columns[3].startswith("writing") and len(columns) == 4
    ranks = {row[0][0]: row[1:] for row in section.rows if row}
    for column, top in ((1, "m1"), (2, "m2")):  # after "all prompts": code, writing
        highlighted = [model for model, cells in ranks.items() if cells[column][1] == "top"]
        assert highlighted == [top] and ranks[top][column][0] == "1"
    assert [text for text, _ in ranks["top"][1:]] == ["m1", "m2"]
    assert [row[0][0] for row in section.rows if row] == ["m1", "m2", "m3", "top"]
    assert section.skipped == ["misc", "partial"]

    plain, _ = rate(db, "--dataset", "planted", "--missing", "drop-prompts", "--bootstrap", "0")
    eqarena("report", "--db", db, "--run", plain, "--out", str(folder / "out"))
    without = CategorySection()
    without.feed((folder / "out" / f"eqarena-{plain}.html").read_text(encoding="utf-8"))
    assert not without.found


def test_unknown_category_and_bad_flags_are_one_line_errors(planted):
    db = planted[0]
    before = query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'")
    line = fails("rate", "--db", db, "--dataset", "planted", "--category", "poetry")
    assert line == (
        "error: --category 'poetry': dataset 'planted' has no such category "
        "(its categories: code, misc, partial, writing)"
    )
    line = fails("rate", "--db", db, "--dataset", "planted", "--category", "code", "--by", "category")
    assert line.startswith("error: --category and --by cannot be combined")
    assert fails("rate", "--db", db, "--dataset", "planted", "--by", "topic").startswith(
        "error: --by must be one of category, cluster; got 'topic'"
    )
    assert fails("rate", "--db", db, "--dataset", "planted", "--by", "cluster").startswith(
        "error: --by cluster: dataset 'planted' has no prompt clusters"
    )
    assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'") == before


def test_a_dataset_without_categories_is_a_clear_error(tmp_path):
    db = str(tmp_path / "w.duckdb")
    eqarena(
        "import",
        "pairwise",
        str(planted_table(tmp_path / "bare.csv", with_category=False)),
        "--dataset",
        "bare",
        "--db",
        db,
    )
    for flags in (("--category", "code"), ("--by", "category")):
        line = fails("rate", "--db", db, "--dataset", "bare", "--missing", "drop-prompts", *flags)
        option = " ".join(flags) if flags[0] == "--by" else "--category"
        assert line == (
            f"error: {option}: dataset 'bare' has no prompt categories (none of its 11 prompts has one "
            f"in table prompts); rate without {option}"
        )
    assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'") == [(0,)]
    assert query(db, "SELECT count(*) FROM ratings") == [(0,)]


def test_many_groups_are_the_report_tables_rows():
    from types import SimpleNamespace

    from eqarena.report.category_table import category_table
    from eqarena.report.sections_categories import WIDE_UP_TO, categories_section
    from eqarena.warehouse.category_ratings import GroupRating, GroupRow

    names = [f"k{k:02d}" for k in range(WIDE_UP_TO + 1)]
    groups = [GroupRow("cluster", n, 2, 2, 2, "rated", None) for n in names]
    ratings = [
        GroupRating("cluster", n, "ne", m, r, rank, None, 2, 0.0)
        for k, n in enumerate(names)
        for m, r, rank in ((("a", 0.0, 1), ("b", -0.5, 2)) if k % 2 else (("b", 0.0, 1), ("a", -0.5, 2)))
    ]
    html = categories_section(SimpleNamespace(categories=category_table(groups, ratings), ratings=[]))
    section = CategorySection()
    section.feed(html)
    assert [text for text, _ in section.header][:3] == ["cluster", "prompts", "top"]
    rows = {row[0][0]: row for row in section.rows if row}
    assert list(rows) == names
    assert rows["k01"][2][0] == "a" and rows["k02"][2][0] == "b"
