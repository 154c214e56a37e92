"""Payoff-tensor assembly from stored judgments: position balancing, pooling, coverage, drop policies."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from eqarena import warehouse
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments
from eqarena.warehouse.tensor import (
    ASSEMBLY_BYTES_PER_CELL,
    IncompleteTensorError,
    TensorTooLargeError,
    UnknownJudgeError,
    apply_missing_policy,
    assemble_tensor,
    read_battles,
)

pytestmark = pytest.mark.unit

DATASET = "synthetic"


@pytest.fixture
def con(db_path):
    con = warehouse.connect(db_path)
    yield con
    con.close()


def _row(judge, prompt, a, b, k, score, status="ok", template="t1"):
    if status != "ok":
        return JudgmentRow(judge, template, DATASET, prompt, a, b, k, status, error="boom")
    return JudgmentRow(judge, template, DATASET, prompt, a, b, k, "ok", verdict="x", score=score)


def _random_rows(rng, judges, prompts, models, max_samples=3, drop=0.0, bad=0.1):
    """Every ordered pair judged 1..max_samples times per judge, some rows unparsed or missing."""
    rows = []
    for judge in judges:
        for p in prompts:
            for a in models:
                for b in models:
                    if a == b:
                        continue
                    for k in range(int(rng.integers(1, max_samples + 1))):
                        if rng.random() < drop:
                            continue
                        status = "unparsed" if rng.random() < bad else "ok"
                        rows.append(_row(judge, p, a, b, k, float(rng.choice([-1, -0.5, 0, 0.5, 1])), status))
    return rows


def _reference(rows, judges):
    """u_king by plain loops: per judge and order the mean ok score, judges averaged, orders averaged."""
    per = defaultdict(list)
    for r in rows:
        if r.status == "ok" and r.judge in judges:
            per[(r.judge, r.prompt_id, r.model_a, r.model_b)].append(r.score)
    order = defaultdict(list)
    for (_judge, p, a, b), scores in per.items():
        order[(p, a, b)].append(sum(scores) / len(scores))
    means = {k: sum(v) / len(v) for k, v in order.items()}
    u = {}
    for (p, a, b), s_ab in means.items():
        if (p, b, a) in means:
            u[(p, a, b)] = 0.5 * (s_ab - means[(p, b, a)])
    return u


def test_matches_loop_reference_with_uneven_samples_and_pooled_judges(con):
    rng = np.random.default_rng(7)
    prompts, models, judges = [str(k) for k in range(1, 7)], ["alpha", "beta", "gamma", "delta"], ["j1", "j2"]
    rows = _random_rows(rng, judges, prompts, models)
    insert_judgments(con, rows)
    for chosen in (["j1"], ["j1", "j2"]):
        t = assemble_tensor(con, DATASET, chosen)
        ref = _reference(rows, set(chosen))
        assert t.prompts == tuple(prompts) and t.models == tuple(sorted(models))
        for p_idx, p in enumerate(t.prompts):
            for i, a in enumerate(t.models):
                for j, b in enumerate(t.models):
                    if a == b:
                        assert t.u_king[p_idx, i, j] == 0 and t.covered[p_idx, i, j]
                    elif (p, a, b) in ref:
                        assert t.u_king[p_idx, i, j] == pytest.approx(ref[(p, a, b)], abs=1e-12)
                        assert t.covered[p_idx, i, j]
                    else:
                        assert np.isnan(t.u_king[p_idx, i, j]) and not t.covered[p_idx, i, j]


def test_each_order_counts_equally_whatever_its_sample_count(con):
    # i as A wins 3 times; j as A wins once: position-balanced u = 1/2 (1 - 1) = 0, not (3 - 1) / 4.
    rows = [_row("j", "1", "i", "j", k, 1.0) for k in range(3)] + [_row("j", "1", "j", "i", 0, 1.0)]
    insert_judgments(con, rows)
    t = assemble_tensor(con, DATASET, ["j"])
    assert t.u_king[0, 0, 1] == 0.0 and t.u_king[0, 1, 0] == 0.0
    assert t.samples[0, 0, 1] == 3 and t.samples[0, 1, 0] == 1


def test_position_bias_cancels_and_tensor_is_antisymmetric(con):
    rng = np.random.default_rng(1)
    models = ["a", "b", "c"]
    rows = _random_rows(rng, ["biased"], ["1", "2", "3"], models, bad=0.0)
    # A judge that always prefers assistant A says nothing about the models.
    rows = [JudgmentRow(**{**r.__dict__, "score": 1.0}) for r in rows]
    insert_judgments(con, rows)
    t = assemble_tensor(con, DATASET, ["biased"])
    assert t.complete
    np.testing.assert_array_equal(t.u_king, 0.0)

    con.execute("DELETE FROM judgments")
    rows = _random_rows(np.random.default_rng(2), ["j"], ["1", "2", "3", "4"], models, bad=0.2)
    insert_judgments(con, rows)
    t = assemble_tensor(con, DATASET, ["j"])
    both = t.covered & t.covered.swapaxes(1, 2)
    np.testing.assert_array_equal(t.covered, t.covered.swapaxes(1, 2))
    np.testing.assert_allclose(t.u_king[both], -t.u_king.swapaxes(1, 2)[both], atol=0)
    assert np.all(np.abs(t.u_king[both]) <= 1)


def test_failed_samples_leave_cells_missing_never_zero(con):
    rows = [
        _row("j", "1", "a", "b", 0, 0.5),
        _row("j", "1", "b", "a", 0, None, status="error"),
        _row("j", "1", "a", "c", 0, 1.0),
        _row("j", "1", "c", "a", 0, -1.0),
        _row("j", "1", "b", "c", 0, 0.0),
        _row("j", "1", "c", "b", 0, 0.0),
    ]
    insert_judgments(con, rows)
    t = assemble_tensor(con, DATASET, ["j"])
    assert not t.complete
    assert np.isnan(t.u_king[0, 0, 1]) and np.isnan(t.u_king[0, 1, 0])
    assert t.u_king[0, 0, 2] == 1.0 and t.u_king[0, 2, 0] == -1.0
    assert t.u_king[0, 1, 2] == 0.0 and t.covered[0, 1, 2]
    assert int(t.missing_pairs.sum()) == 1


def test_prompts_and_models_of_the_dataset_without_judgments_are_uncovered(con):
    con.execute(
        "INSERT INTO prompts (dataset, prompt_id, text) VALUES (?, '1', 'q1'), (?, '2', 'q2')", [DATASET, DATASET]
    )
    con.execute("INSERT INTO models (model_id, family) VALUES ('a', 'a'), ('b', 'b'), ('c', 'c')")
    for m in "abc":
        con.execute(
            "INSERT INTO responses (dataset, prompt_id, model_id, text, text_sha256) VALUES (?, '1', ?, 't', 'h')",
            [DATASET, m],
        )
    insert_judgments(con, [_row("j", "1", "a", "b", 0, 1.0), _row("j", "1", "b", "a", 0, -1.0)])
    t = assemble_tensor(con, DATASET, ["j"])
    assert t.prompts == ("1", "2") and t.models == ("a", "b", "c")
    # prompt 2 has no judgment at all; model c none on prompt 1: 3 + 2 missing unordered pairs.
    assert int(t.missing_pairs.sum()) == 5
    assert t.pair_coverage()[0, 1] == 1 and t.pair_coverage()[0, 2] == 0


def _incomplete(con):
    """4 models x 5 prompts, complete except model 'd' on prompts 2 and 4 and pair (a, b) on prompt 3."""
    rows = _random_rows(np.random.default_rng(3), ["j"], ["1", "2", "3", "4", "5"], ["a", "b", "c", "d"], bad=0.0)
    rows = [
        r
        for r in rows
        if not (r.prompt_id in ("2", "4") and "d" in (r.model_a, r.model_b))
        and not (r.prompt_id == "3" and {r.model_a, r.model_b} == {"a", "b"} and r.model_a == "a")
    ]
    insert_judgments(con, rows)
    return assemble_tensor(con, DATASET, ["j"])


def test_incomplete_tensor_is_refused_with_what_is_missing(con):
    t = _incomplete(con)
    with pytest.raises(IncompleteTensorError) as err:
        apply_missing_policy(t, "refuse")
    message = str(err.value)
    assert "cover 23 of 30" in message and "7 missing on 3 prompt(s) (2, 3, 4)" in message
    assert "pass --missing impute, drop-prompts or drop-models" in message
    with pytest.raises(ValueError, match="policy must be one of refuse, drop-prompts, drop-models"):
        apply_missing_policy(t, "zero-fill")


def test_drop_prompts_removes_exactly_the_incomplete_prompts(con):
    t = _incomplete(con)
    kept, dropped = apply_missing_policy(t, "drop-prompts")
    assert kept.prompts == ("1", "5") and kept.complete
    assert dropped.prompts == (("2", 3), ("3", 1), ("4", 3))
    np.testing.assert_array_equal(kept.u_king, t.u_king[[0, 4]])
    assert "dropped 3 prompt(s): 2, 3, 4" in dropped.summary()


def test_drop_models_removes_the_model_in_most_missing_cells_first(con):
    t = _incomplete(con)
    kept, dropped = apply_missing_policy(t, "drop-models")
    # d is in 6 missing cells, then (a, b) on prompt 3 remains: a and b tie at 1, a goes (alphabetical).
    assert [n for n, _ in dropped.models] == ["d", "a"]
    assert dropped.models[0][1] == 6
    assert kept.models == ("b", "c") and kept.complete and kept.prompts == t.prompts


def test_policy_is_a_no_op_on_a_complete_tensor(con):
    insert_judgments(con, _random_rows(np.random.default_rng(4), ["j"], ["1", "2"], ["a", "b"], bad=0.0))
    t = assemble_tensor(con, DATASET, ["j"])
    for policy in ("refuse", "drop-prompts", "drop-models"):
        kept, dropped = apply_missing_policy(t, policy)
        assert kept is t and not dropped.prompts and not dropped.models


def test_unknown_judge_is_named(con):
    insert_judgments(con, [_row("j", "1", "a", "b", 0, 1.0)])
    expected = r"no judgments by judge nobody on dataset 'synthetic' \(judges present: j\)"
    with pytest.raises(UnknownJudgeError, match=expected):
        assemble_tensor(con, DATASET, ["nobody"])


def test_a_tensor_over_the_memory_is_refused_before_it_is_allocated(con):
    """3 prompts x 4 models: refused with one byte less than assembling needs, named with its shape;
    assembled with exactly that much."""
    rows = _random_rows(np.random.default_rng(0), ["j"], ["1", "2", "3"], ["a", "b", "c", "d"], bad=0.0)
    insert_judgments(con, rows)
    needed = 3 * 4 * 4 * ASSEMBLY_BYTES_PER_CELL
    with pytest.raises(TensorTooLargeError, match=r"payoff tensor of 3 prompts x 4 models needs .*\(--category\)"):
        assemble_tensor(con, DATASET, ["j"], memory_bytes=needed - 1)
    assert assemble_tensor(con, DATASET, ["j"], memory_bytes=needed).u_king.shape == (3, 4, 4)


def test_template_filter_and_fingerprint(con):
    rows = [
        _row("j", "1", "a", "b", 0, 1.0, template="t1"),
        _row("j", "1", "b", "a", 0, 1.0, template="t1"),
        _row("j", "1", "a", "b", 0, 1.0, template="t2"),
        _row("j", "1", "b", "a", 0, -1.0, template="t2"),
    ]
    insert_judgments(con, rows)
    assert assemble_tensor(con, DATASET, ["j"], template_hash="t1").u_king[0, 0, 1] == 0.0
    assert assemble_tensor(con, DATASET, ["j"], template_hash="t2").u_king[0, 0, 1] == 1.0
    before = assemble_tensor(con, DATASET, ["j"])
    assert before.fingerprint == assemble_tensor(con, DATASET, ["j"]).fingerprint
    con.execute("UPDATE judgments SET score = 0.5 WHERE template_hash = 't2' AND model_a = 'a'")
    assert assemble_tensor(con, DATASET, ["j"]).fingerprint != before.fingerprint


def test_battles_are_the_ok_judgments_behind_the_kept_tensor(con):
    t = _incomplete(con)
    kept, _ = apply_missing_policy(t, "drop-prompts")
    battles = read_battles(con, kept)
    assert len(battles["score"]) == int(kept.samples.sum())
    counts = np.zeros_like(kept.samples)
    np.add.at(counts, (battles["prompt"], battles["model_a"], battles["model_b"]), 1)
    np.testing.assert_array_equal(counts, kept.samples)
    # the battles' position-balanced means give back u_king
    sums = np.zeros(kept.samples.shape)
    np.add.at(sums, (battles["prompt"], battles["model_a"], battles["model_b"]), battles["score"])
    mean = np.divide(sums, kept.samples, out=np.zeros_like(sums), where=kept.samples > 0)
    np.testing.assert_allclose(0.5 * (mean - mean.swapaxes(1, 2)), kept.u_king, atol=1e-12)


def test_orders_any_covers_cells_judged_in_one_order(con):
    """--orders any: a one-order cell takes that order's mean (from i's side); two-order cells stay balanced."""
    rng = np.random.default_rng(11)
    prompts, models = ["1", "2", "3", "4"], ["alpha", "beta", "gamma"]
    rows = _random_rows(rng, ["j"], prompts, models, drop=0.5, bad=0.0)
    insert_judgments(con, rows)
    balanced = assemble_tensor(con, DATASET, ["j"])
    loose = assemble_tensor(con, DATASET, ["j"], orders="any")
    means = defaultdict(list)
    for r in rows:
        means[(r.prompt_id, r.model_a, r.model_b)].append(r.score)
    one_order = 0
    for p, prompt in enumerate(loose.prompts):
        for i, a in enumerate(loose.models):
            for j, b in enumerate(loose.models):
                if i == j:
                    continue
                fwd, rev = means.get((prompt, a, b)), means.get((prompt, b, a))
                if fwd and rev:
                    assert loose.u_king[p, i, j] == pytest.approx(balanced.u_king[p, i, j], abs=1e-12)
                elif fwd or rev:
                    one_order += 1
                    expected = np.mean(fwd) if fwd else -np.mean(rev)
                    assert loose.covered[p, i, j] and not balanced.covered[p, i, j]
                    assert loose.u_king[p, i, j] == pytest.approx(expected, abs=1e-12)
                else:
                    assert not loose.covered[p, i, j] and np.isnan(loose.u_king[p, i, j])
    assert one_order > 0
    covered = loose.covered
    np.testing.assert_array_equal(loose.u_king[covered], -np.swapaxes(loose.u_king, 1, 2)[covered])
    with pytest.raises(ValueError, match="--orders must be one of both, any"):
        assemble_tensor(con, DATASET, ["j"], orders="either")
