"""SQL for the prompt-group game: how densely the judgments cover the (prompt, model pair) cells, which
groupings a dataset's prompts have, and the battles with their groups (docs/game.md#prompt-groups).

Everything here aggregates in DuckDB: nothing of size P x M x M is built, so a 2,000,000-battle log is
measured in about a second before any tensor exists."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import duckdb
import numpy as np

from eqarena.exceptions import EqarenaError
from eqarena.warehouse.catalog import has_scores

COLUMN_GROUPINGS = ("category", "cluster")  # columns of table prompts
TAG_GROUPINGS = ("language", "turn", "tag")  # rows of table prompt_tags
AUTO_ORDER = ("tag", "category", "language", "cluster")  # what `--prompt-groups auto` takes, first found
OTHER = "(other)"


@dataclass(frozen=True)
class CellCoverage:
    """The ok judgments of some judges on a dataset: prompts, models and battles (ok judgments), the
    (prompt, unordered pair) cells judged in either order, and the prompts with at least M - 1 judged
    pairs (as many as a prompt needs for its own Bradley-Terry strengths)."""

    prompts: int
    models: int
    battles: int
    judged_cells: int
    spanned_prompts: int

    @property
    def cells(self) -> int:
        return self.prompts * self.models * (self.models - 1) // 2

    @property
    def share(self) -> float:
        return self.judged_cells / self.cells if self.cells else 0.0


def _where(judges) -> tuple[str, dict]:
    return "dataset = $dataset AND list_contains($judges, judge) AND status = 'ok'", {"judges": list(judges)}


def judged_coverage(con: duckdb.DuckDBPyConnection, dataset: str, judges) -> CellCoverage:
    """`CellCoverage` of the pairwise judgments of `judges` on `dataset`, counted in DuckDB."""
    where, params = _where(judges)
    params["dataset"] = dataset
    row = con.execute(
        f"""
        WITH j AS (SELECT prompt_id, least(model_a, model_b) AS lo, greatest(model_a, model_b) AS hi
                   FROM judgments WHERE {where}),
             per_prompt AS (SELECT prompt_id, count(DISTINCT (lo, hi)) AS pairs FROM j GROUP BY prompt_id),
             models AS (SELECT lo AS m FROM j UNION SELECT hi FROM j)
        SELECT (SELECT count(*) FROM per_prompt), (SELECT count(*) FROM models), (SELECT count(*) FROM j),
               (SELECT coalesce(sum(pairs), 0) FROM per_prompt),
               (SELECT count(*) FROM per_prompt WHERE pairs >= (SELECT count(*) FROM models) - 1)
        """,
        params,
    ).fetchone()
    return CellCoverage(*(int(v) for v in row))


def grouping_sizes(con: duckdb.DuckDBPyConnection, dataset: str) -> dict[str, int]:
    """{grouping: number of distinct labels} of every grouping the dataset's prompts have."""
    out = {}
    for column in COLUMN_GROUPINGS:
        n = con.execute(
            f"SELECT count(DISTINCT {column}) FROM prompts WHERE dataset = ? AND {column} IS NOT NULL "
            f"AND trim({column}) <> ''",
            [dataset],
        ).fetchone()[0]
        if n:
            out[column] = int(n)
    if not _has_tags(con):  # a warehouse from before migration 016, opened read-only
        return out
    for grouping, n in con.execute(
        "SELECT grouping, count(DISTINCT tag) FROM prompt_tags WHERE dataset = ? GROUP BY grouping ORDER BY grouping",
        [dataset],
    ).fetchall():
        out[grouping] = int(n)
    return out


def _has_tags(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(
        con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'prompt_tags'").fetchone()[0]
    )


@dataclass(frozen=True, eq=False)
class LabelledBattles:
    """The ok judgments as battles and their groups: `arrays` holds model_a, model_b (indices into
    `models`), score (from model_a's side), prompt (index into the dataset's judged prompts), and the
    memberships member_battle, member_group (battle k is in group g, an index into `groups`)."""

    models: tuple[str, ...]
    groups: tuple[str, ...]
    num_prompts: int
    arrays: dict[str, np.ndarray]
    fingerprint: str
    inputs: tuple[tuple[str, str, int], ...] = ()  # (judge, status, judgment rows), as PayoffTensor.inputs


def read_group_battles(con: duckdb.DuckDBPyConnection, dataset: str, judges, grouping: str) -> LabelledBattles:
    """Every ok judgment of `judges` on `dataset` with its groups under `grouping` ('all', a column of
    prompts, or a grouping of prompt_tags); a battle whose prompt has no label is in group OTHER."""
    where, params = _where(judges)
    params["dataset"] = dataset
    if grouping == "all":
        labels = ""
    elif grouping in COLUMN_GROUPINGS:
        labels = (
            f"SELECT prompt_id, {grouping} AS label FROM prompts WHERE dataset = $dataset "
            f"AND {grouping} IS NOT NULL AND trim({grouping}) <> ''"
        )
    elif grouping in TAG_GROUPINGS:
        labels = f"SELECT prompt_id, tag AS label FROM prompt_tags WHERE dataset = $dataset AND grouping = '{grouping}'"
    else:
        raise ValueError(f"unknown prompt grouping {grouping!r}")
    prompt_ids = [
        r[0]
        for r in con.execute(f"SELECT DISTINCT prompt_id FROM judgments WHERE {where} ORDER BY 1", params).fetchall()
    ]
    models = tuple(
        r[0]
        for r in con.execute(
            f"SELECT m FROM (SELECT model_a AS m FROM judgments WHERE {where} "
            f"UNION SELECT model_b FROM judgments WHERE {where}) ORDER BY m",
            params,
        ).fetchall()
    )
    battles = _indexed_battles(con, where, params, prompt_ids, list(models))
    prompt = battles["p"]
    if grouping == "all":  # one group of every battle: no labels to join
        member_battle, member_group, groups = np.arange(len(prompt)), np.zeros(len(prompt), dtype=np.int64), ["all"]
    else:
        member_battle, member_group, groups = _memberships(con, labels, params, prompt_ids, prompt)
    fingerprint = con.execute(
        f"SELECT count(*), bit_xor(hash(prompt_id, model_a, model_b, sample_index, score)) "
        f"FROM judgments WHERE {where}",
        params,
    ).fetchone()
    inputs = con.execute(
        "SELECT judge, status, count(*) FROM judgments WHERE dataset = $dataset AND "
        "list_contains($judges, judge) GROUP BY ALL ORDER BY ALL",
        params,
    ).fetchall()
    return LabelledBattles(
        inputs=tuple((j, st, int(n)) for j, st, n in inputs),
        models=models,
        groups=tuple(str(g) for g in groups),
        num_prompts=len(prompt_ids),
        arrays={
            "model_a": battles["a"],
            "model_b": battles["b"],
            "score": battles["score"],
            "prompt": prompt,
            "member_battle": np.asarray(member_battle, dtype=np.int64),
            "member_group": np.asarray(member_group, dtype=np.int64),
        },
        fingerprint=hashlib.sha256(
            f"{fingerprint[0]}|{fingerprint[1]}|{grouping}|{'|'.join(map(str, groups))}".encode()
        ).hexdigest()[:16],
    )


def _indexed_battles(con, where: str, params: dict, prompt_ids: list[str], models: list[str]) -> dict:
    """The battles as index arrays p (into prompt_ids), a, b (into models) and score, in the table's order
    (DuckDB keeps the insertion order of a scan: the same file gives the same order). DuckDB hashes the
    names (a join of 2M rows with the name tables costs seconds, the hashes 0.1 s); NumPy looks the
    hashes up among the names' own, which must be distinct."""
    rows = con.execute(
        f"SELECT hash(prompt_id) AS p, hash(model_a) AS a, hash(model_b) AS b, score FROM judgments WHERE {where}",
        params,
    ).fetchnumpy()
    out = {"score": np.asarray(rows["score"], dtype=np.float64)}
    for column, names in (("p", prompt_ids), ("a", models), ("b", models)):
        keys = _name_hashes(con, names)
        order = np.argsort(keys)
        if len(np.unique(keys)) != len(keys):
            raise EqarenaError("two names share a 64-bit hash; eqarena cannot index this dataset's battles")
        at = np.searchsorted(keys[order], np.asarray(rows[column], dtype=np.uint64))
        out[column] = order[at].astype(np.int64)
    return out


def _name_hashes(con, names: list[str]) -> np.ndarray:
    """DuckDB's hash of each name, in order."""
    if not names:
        return np.zeros(0, dtype=np.uint64)
    rows = con.execute(
        "SELECT k, hash(name) AS h FROM (SELECT unnest($names::VARCHAR[]) AS name, "
        "unnest(range(len($names::VARCHAR[]))) AS k) ORDER BY k",
        {"names": names},
    ).fetchnumpy()
    return np.asarray(rows["h"], dtype=np.uint64)


def _memberships(con, labels: str, params: dict, prompt_ids: list[str], prompt: np.ndarray):
    """(battle, group) rows, every battle with each label of its prompt (OTHER where it has none), and
    the groups' names (sorted, OTHER last)."""
    rows = con.execute(
        f"SELECT DISTINCT prompt_id, label FROM ({labels}) ORDER BY ALL", {"dataset": params["dataset"]}
    ).fetchall()
    position = {p: k for k, p in enumerate(prompt_ids)}
    labelled = [(position[p], str(label)) for p, label in rows if p in position]
    names = sorted({label for _, label in labelled})
    unlabelled = np.ones(len(prompt_ids), dtype=bool)
    unlabelled[[k for k, _ in labelled]] = False
    if unlabelled[prompt].any():
        names.append(OTHER)
    group_of = {name: g for g, name in enumerate(names)}
    order = np.argsort(prompt, kind="stable")  # battles of prompt k: order[starts[k]:starts[k + 1]]
    starts = np.searchsorted(prompt[order], np.arange(len(prompt_ids) + 1))
    battle_parts = [order[starts[k] : starts[k + 1]] for k, _ in labelled]
    group_parts = [np.full(starts[k + 1] - starts[k], group_of[label]) for k, label in labelled]
    rest = np.flatnonzero(unlabelled[prompt])
    battle_parts.append(rest)
    group_parts.append(np.full(len(rest), group_of.get(OTHER, 0)))
    return np.concatenate(battle_parts), np.concatenate(group_parts), names


def pairwise_only(con: duckdb.DuckDBPyConnection, dataset: str, judges) -> bool:
    """Whether none of `judges` is a score judge on `dataset` (score tables are dense per prompt)."""
    if not has_scores(con):
        return True
    return not con.execute(
        "SELECT count(*) FROM scores WHERE dataset = ? AND list_contains(?, judge)", [dataset, list(judges)]
    ).fetchone()[0]
