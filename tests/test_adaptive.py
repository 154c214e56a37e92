"""Adaptive judging (eqarena/solvers/sparse/adaptive.py): the stop rule, the preference for support cells,
determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eqarena.solvers import synthetic_king_tensor
from eqarena.solvers.sparse.adaptive import (
    STOP_BUDGET,
    STOP_CONFIDENT,
    CellStats,
    Rating,
    Replicates,
    adaptive_judging,
    adjacent_order_probabilities,
    both_orders,
    cell_priority,
    cell_sd,
    imputation_sd,
    prompt_effect_variance,
    rate,
    rebel_relevance,
    replicate_equilibria,
    select_cells,
    stop_reason,
    support_relevance,
    tie_probabilities,
)


def noisy_judge(u, seed):
    rng = np.random.default_rng(seed)

    def judge(requests):
        p, a, b = requests.T
        return np.where(rng.random(len(requests)) < (1 + u[p, a, b]) / 2, 1.0, -1.0)

    return judge


def test_stop_rule_threshold_and_budget():
    assert stop_reason(np.array([0.96, 0.99]), 10, 100, 0.95) == STOP_CONFIDENT
    assert stop_reason(np.array([0.96, 0.94]), 10, 100, 0.95) is None
    assert stop_reason(np.array([0.96, 0.94]), 100, 100, 0.95) == STOP_BUDGET
    assert stop_reason(np.array([0.96, 0.94]), 10, None, 0.95) is None
    # a pair whose order is unsure is settled when it is tied within the indifference zone
    assert stop_reason(np.array([0.96, 0.60]), 10, 100, 0.95, ties=np.array([0.0, 0.97])) == STOP_CONFIDENT
    assert stop_reason(np.array([0.96, 0.60]), 10, 100, 0.95, ties=np.array([0.0, 0.90])) is None


def test_tie_probabilities_measure_the_indifference_zone():
    full = np.array([0.0, -0.5, -0.49])  # ranking 0 > 2 > 1
    reps = np.array([[0.0, -0.5, -0.49], [0.0, -0.44, -0.5], [-0.2, -0.5, -0.3], [0.0, -0.6, -0.1]])
    np.testing.assert_allclose(tie_probabilities(full, reps, 0.05), [0.0, 0.25])  # |2 - 1| gaps .01 .06 .2 .5
    np.testing.assert_allclose(tie_probabilities(full, reps, 0.3), [0.5, 0.75])  # |0 - 2| gaps .49 .5 .1 .1


def test_unjudged_cells_are_as_uncertain_as_judged_prompts_depart_from_the_average():
    P, M = 40, 4
    i, j = np.triu_indices(M, 1)
    cells = np.array([(p, a, b) for p in range(P // 2) for a, b in zip(i, j)])  # half the prompts judged
    requests = both_orders(cells)
    sds = []
    for prompt_noise in (0.0, 2.0):
        v = np.asarray(synthetic_king_tensor(P, M, seed=5, judgments=64, prompt_noise=prompt_noise))
        stats = CellStats.empty(P, M)
        stats.add(requests, v[tuple(requests.T)])
        rating = rate(stats)
        sd = imputation_sd(stats, rating)
        residual = (v[: P // 2] - rating.global_prediction[None]) ** 2
        overall = residual.sum() / (P // 2 * M * (M - 1))
        expected = np.sqrt((residual.sum(axis=0) + 5 * overall) / (P // 2 + 5))
        np.testing.assert_allclose(sd[~np.eye(M, dtype=bool)], expected[~np.eye(M, dtype=bool)], rtol=1e-9)
        full_sd = cell_sd(stats, rating, 0.5)
        np.testing.assert_allclose(full_sd[P // 2 :], np.broadcast_to(sd * (1 - np.eye(M)), (P // 2, M, M)))
        sds.append(sd[~np.eye(M, dtype=bool)].mean())
    assert sds[0] < 0.25 < sds[1]  # prompts alike -> small; prompt-specific skills -> large


def test_adjacent_probabilities_count_kept_relations():
    full = np.array([0.0, -0.5, -0.2])  # ranking 0 > 2 > 1
    reps = np.array([[0.0, -0.5, -0.2], [0.0, -0.1, -0.2], [-0.3, -0.5, -0.2], [0.0, -0.6, -0.1]])
    np.testing.assert_allclose(adjacent_order_probabilities(full, reps), [0.75, 0.75])


def test_loop_stops_when_confident_and_at_the_budget():
    u = np.zeros((20, 3, 3))
    u[:, 0, 1:], u[:, 1, 2] = 1.0, 1.0
    u -= u.transpose(0, 2, 1)  # model 0 beats all, 1 beats 2, on every prompt: certain
    done = adaptive_judging(noisy_judge(u, 0), 20, 3, max_calls=10_000, replicates=10, initial_prompts=20)
    assert done.stopped_by == STOP_CONFIDENT and done.calls == [20 * 3 * 2]
    v = np.asarray(synthetic_king_tensor(30, 5, seed=2))
    capped = adaptive_judging(
        noisy_judge(v, 0), 30, 5, max_calls=160, batch_calls=40, replicates=5, stop_probability=1.01, initial_prompts=2
    )
    assert capped.stopped_by == STOP_BUDGET and capped.calls[-1] == 160 and capped.stats.n.sum() == 160
    assert capped.calls == [40, 80, 120, 160]


def test_selection_prefers_cells_of_likely_support_prompts_and_doubtful_models():
    """Relevance follows the prompts' chance of being in the support (over the replicates' equilibria)
    and the models whose place is in doubt; `explore` mixes in uniformly drawn cells."""
    v = np.asarray(synthetic_king_tensor(40, 6, seed=4))
    stats = CellStats.empty(40, 6)
    i, j = np.triu_indices(6, 1)
    cells = np.array([(p, a, b) for p in range(40) for a, b in zip(i, j)])
    stats.add(both_orders(cells), v[tuple(both_orders(cells).T)])  # every cell once
    rating = rate(stats)
    sd = cell_sd(stats, rating, 0.5)
    reps = replicate_equilibria(rating, sd, 10, np.random.default_rng(1))
    chance = np.vstack([rating.masses[0][None], reps.prompt_masses]).mean(axis=0)  # mean prompt mass
    need = np.full(6, 0.05)
    need[3] = 1.0  # only model 3's place is in doubt
    priority = cell_priority(rating, reps, sd, need, discovery=0.0, rebel_check=0.0)  # the ratings term alone
    chosen = select_cells(priority, stats, 30, np.random.default_rng(0))
    assert ((chosen[:, 1] == 3) | (chosen[:, 2] == 3)).all()
    assert chance[chosen[:, 0]].mean() > 2 * chance.mean()
    # the uniform baseline does not prefer them; half exploration lies in between
    uniform = select_cells(np.ones_like(sd), stats, 30, np.random.default_rng(0))
    mixed = select_cells(priority, stats, 30, np.random.default_rng(0), explore=0.5)
    assert chance[uniform[:, 0]].mean() < chance[mixed[:, 0]].mean() < chance[chosen[:, 0]].mean()
    assert 10 <= ((mixed[:, 1] == 3) | (mixed[:, 2] == 3)).sum() < 30 and len(mixed) == 30


def test_rebel_term_checks_the_king_against_every_rebel_on_the_support_prompts():
    """With a pure rebel mix the ratings term looks only at the cells against that rebel; the rebel term
    adds the king's cells against every other rebel on the support prompts (their deviations keep the
    equilibrium), and nothing off the support."""
    P, M = 6, 4
    prompts, king, rebel = np.array([0.5, 0.5, 0, 0, 0, 0]), np.eye(M)[0], np.eye(M)[1]
    rel = rebel_relevance(prompts[None], king[None])
    assert np.isclose(rel.sum(), 1.0)
    assert np.allclose(rel[:2, 0, 1:], 1 / 12) and np.allclose(rel[:2, 1:, 0], 1 / 12)  # king row and column
    assert np.all(rel[2:] == 0) and np.all(rel[:, 1:, 1:] == 0)
    u = np.zeros((P, M, M))
    u[:, 0, 1:], u[:, 1:, 0] = 1.0, -1.0
    rating = Rating(
        u,
        np.zeros((P, M, M), bool),
        [prompts, king, rebel],
        [np.where(prompts > 0, 0.0, -1.0), np.array([0.0, -1, -1, -1]), np.array([0.0, 0.0, -1, -1])],
        np.zeros((M, M)),
    )
    reps = Replicates(np.zeros((0, M)), np.zeros((0, P)), np.zeros((0, M)), np.zeros((0, M)))
    sd, need = np.full((P, M, M), 0.3), np.full(M, 0.05)
    stats = CellStats.empty(P, M)
    king_row = {(p, 0, j) for p in (0, 1) for j in (1, 2, 3)}
    without = select_cells(
        cell_priority(rating, reps, sd, need, discovery=0.0, rebel_check=0.0), stats, 6, np.random.default_rng(0)
    )
    with_rebels = select_cells(cell_priority(rating, reps, sd, need, discovery=0.0), stats, 6, np.random.default_rng(0))
    assert {tuple(c) for c in with_rebels} == king_row
    assert len({tuple(c) for c in without} & king_row) < len(king_row)


def test_support_relevance_weights_prompts_near_the_support_and_king_rebel_cells():
    v = np.asarray(synthetic_king_tensor(60, 6, seed=8))
    stats = CellStats.empty(60, 6)
    i, j = np.triu_indices(6, 1)
    cells = np.array([(p, a, b) for p in range(50) for a, b in zip(i, j)])  # prompts 50-59 unjudged
    stats.add(both_orders(cells), v[tuple(both_orders(cells).T)])
    rating = rate(stats)
    rel = support_relevance(rating, cell_sd(stats, rating, 0.5))
    assert np.isclose(rel.sum(), 1.0)
    per_prompt = rel.sum(axis=(1, 2))
    support = rating.masses[0] > 1e-6
    far = (rating.ratings[0] < np.quantile(rating.ratings[0][:50], 0.25)) & ~support
    far[50:] = False
    assert support[:50].any() and far.any()
    assert per_prompt[support].mean() > 5 * per_prompt[far].mean()
    assert per_prompt[50:].mean() > per_prompt[far].mean()  # unjudged prompts could be in the support
    king, rebel = rating.masses[1] > 1e-9, rating.masses[2] > 1e-9
    neither = ~(king[:, None] & rebel[None, :]) & ~(rebel[:, None] & king[None, :])
    assert np.all(rel[:, neither] == 0) and rel[:, ~neither].sum() > 0.99


def test_unjudged_prompts_payoff_sd_covers_their_correlated_prompt_effect():
    """An unjudged prompt's payoff u(p, x_king, x_rebel) departs from its imputation by a prompt effect
    shared by its cells; with that variance added, 2 sd cover the true departure of most hidden prompts,
    which the independent cell sds alone fail to do."""
    within_independent, within = [], []
    for seed in range(6):
        v = np.asarray(synthetic_king_tensor(80, 10, seed=seed))
        stats = CellStats.empty(80, 10)
        i, j = np.triu_indices(10, 1)
        cells = np.array([(p, a, b) for p in range(40) for a, b in zip(i, j)])  # prompts 40-79 unjudged
        stats.add(both_orders(cells), v[tuple(both_orders(cells).T)])
        rating = rate(stats)
        sd = cell_sd(stats, rating, 0.5)
        effect = prompt_effect_variance(rating)
        assert np.all(effect[:40] == 0) and np.all(effect[40:] > 0)
        x = np.outer(rating.masses[1], rating.masses[2])
        d = np.triu(x - x.T, 1)  # d payoff / d u(p, i, j)
        departure = np.abs(np.einsum("ij,pij->p", d, v - rating.u_king))[40:]
        independent = np.sqrt(np.einsum("ij,pij->p", d**2, sd**2))[40:]
        within_independent.extend(departure <= 2 * independent)
        within.extend(departure <= 2 * np.sqrt(independent**2 + effect[40:]))
    assert np.mean(within) >= 0.9
    assert np.mean(within_independent) < 0.85


def test_cells_at_the_sample_cap_are_never_chosen():
    stats = CellStats.empty(2, 3)
    stats.add(both_orders(np.array([[0, 0, 1]])), np.array([1.0, -1.0]))
    priority = np.zeros((2, 3, 3))
    priority[0, 0, 1] = 10.0
    chosen = select_cells(priority, stats, 1, np.random.default_rng(0), max_samples_per_order=1)
    assert chosen.tolist() != [[0, 0, 1]] and len(chosen) == 1


@pytest.mark.parametrize("strategy", ["adaptive", "uniform"])
def test_same_seed_same_run(strategy):
    v = np.asarray(synthetic_king_tensor(30, 5, seed=3))
    runs = [
        adaptive_judging(
            noisy_judge(v, 7),
            30,
            5,
            max_calls=200,
            batch_calls=60,
            replicates=5,
            stop_probability=1.01,
            strategy=strategy,
            seed=11,
        )
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].stats.n, runs[1].stats.n)
    np.testing.assert_array_equal(runs[0].ratings[-1], runs[1].ratings[-1])
    other = adaptive_judging(
        noisy_judge(v, 7),
        30,
        5,
        max_calls=200,
        batch_calls=60,
        replicates=5,
        stop_probability=1.01,
        strategy=strategy,
        seed=12,
    )
    assert not np.array_equal(other.stats.n, runs[0].stats.n)


def test_adaptive_flow_with_the_replay_judge(prefect_harness, tmp_path):
    from eqarena import warehouse
    from eqarena.flows import adaptive_judge_flow
    from eqarena.tasks import ingest

    db = tmp_path / "prd.duckdb"
    ingest.write_dataset.fn(str(db), ingest.read_dataset.fn("vicuna80"), False, "ingest-test")
    from eqarena.options import AdaptiveOptions, JudgeOptions, RetryPolicy, SpendCaps

    options = JudgeOptions(
        judge=f"recorded:prd:gpt4@{db}",
        dataset="vicuna80",
        samples_per_order=1,
        retry=RetryPolicy(attempts=1),
        caps=SpendCaps(max_calls=300),
        adaptive=AdaptiveOptions(batch_calls=100, replicates=5, explore=0.5, indifference=0.05, seed=3),
    )
    out = adaptive_judge_flow(options, str(db))
    assert out.stopped_by == "budget" and out.calls == [100, 200, 300] and out.stats.ok == 300
    con = warehouse.connect(db)
    got = con.execute(
        "SELECT count(*), count(DISTINCT (prompt_id, model_a, model_b)), max(sample_index) "
        "FROM judgments WHERE judge = 'recorded:prd:gpt4' AND status = 'ok'"
    ).fetchone()
    run = con.execute("SELECT status, parameters FROM runs WHERE run_id = ?", [out.run_id]).fetchone()
    con.close()
    assert got == (300, 300, 0) and run[0] == "ok"
    params = json.loads(run[1]) if isinstance(run[1], str) else run[1]
    adaptive = params["adaptive"]
    assert (adaptive["explore"], adaptive["indifference"], adaptive["seed"]) == (0.5, 0.05, 3)
    assert sorted(out.ranking) == sorted(["bard", "claude", "gpt35", "gpt4", "vicuna-13b"])


def test_adaptive_rounds_against_a_provider_over_http(prefect_harness, tmp_path):
    """Several rounds through one provider's HTTP client (the local fake server, real OpenAI SDK): every
    round's calls reach the server and are stored; nothing fails when the second round starts."""
    from fake_llm_server import FakeLLMServer, plant_dataset
    from judging import judge_options

    from eqarena import warehouse
    from eqarena.flows import adaptive_judge_flow
    from eqarena.options import AdaptiveOptions

    quality = {"m1": 0.1, "m2": 0.05, "m3": 0.0, "m4": -0.05}  # close: the ranking stays in doubt for rounds
    db = tmp_path / "toy.duckdb"
    con = warehouse.connect(db)
    plant_dataset(con, "toy", [str(p) for p in range(1, 7)], list(quality))
    con.close()
    with FakeLLMServer(quality) as server:
        options = judge_options(
            f"openai-compatible:judge@{server.openai_base_url}",
            samples_per_order=1,
            max_calls=90,
            multi_sample=False,
            adaptive=AdaptiveOptions(batch_calls=30, replicates=5, initial_prompts=2, seed=1),
        )
        out = adaptive_judge_flow(options, str(db))
        requests = server.snapshot().requests
    assert len(out.calls) >= 3, out.calls  # three rounds or more through one client
    assert out.calls[-1] == out.stats.ok == requests > out.calls[0]
    con = warehouse.connect(db, read_only=True)
    stored = con.execute(
        "SELECT count(*) FROM judgments WHERE judge = 'openai-compatible:judge' AND status = 'ok'"
    ).fetchall()[0][0]
    status = con.execute("SELECT status FROM runs WHERE run_id = ?", [out.run_id]).fetchall()[0][0]
    con.close()
    assert stored == requests and status == "ok"


def test_adaptive_rounds_send_the_runs_sampling_options_and_rate_limits(prefect_harness, tmp_path):
    """`judge --adaptive` sends --max-tokens and --temperature with every call and keeps to --rpm (it
    used to judge with the default sampling and no rate limit)."""
    from fake_llm_server import FakeLLMServer, plant_dataset
    from judging import judge_options

    from eqarena import warehouse
    from eqarena.flows import adaptive_judge_flow
    from eqarena.options import AdaptiveOptions, GenerationOptions

    quality = {"m1": 0.1, "m2": 0.05, "m3": -0.05}
    db = tmp_path / "toy.duckdb"
    con = warehouse.connect(db)
    plant_dataset(con, "toy", [str(p) for p in range(1, 4)], list(quality))
    con.close()
    with FakeLLMServer(quality, rpm_limit=120.0) as server:  # 429 beyond 2 requests a second
        options = judge_options(
            f"openai-compatible:judge@{server.openai_base_url}",
            samples_per_order=1,
            max_calls=6,
            multi_sample=False,
            concurrency=4,
            rpm=60.0,  # one a second: the server never has to refuse
            generation=GenerationOptions(max_tokens=77, temperature=0.3),
            adaptive=AdaptiveOptions(batch_calls=6, replicates=5, initial_prompts=1, seed=2),
        )
        out = adaptive_judge_flow(options, str(db))
        seen = server.snapshot()
    assert seen.requests == out.calls[-1] == 6
    assert dict(seen.sampling) == {(77, 0.3): 6}
    assert seen.rate_limited == 0


@pytest.mark.parametrize("calls", [0, 5, 66])
def test_adaptive_judging_stops_at_the_max_cost_cap(prefect_harness, tmp_path, calls):
    """`judge --adaptive --max-cost` keeps to the cap as a plain judge run does (it used to ignore it): the
    spend stays under a cap worth `calls` calls at the plan's estimated price, and the run says the cap
    stopped it. The first round (random design) is 60 of the 72 calls there are: a cap of 66 rates it and
    rates again after the calls it admits of the second; a cap that cuts the design short ends without a
    rating, in a sentence."""
    from fake_llm_server import FakeLLMServer, plant_dataset
    from typer.testing import CliRunner

    from eqarena import warehouse
    from eqarena.cli.app import app

    quality = {"m1": 0.1, "m2": 0.05, "m3": 0.0, "m4": -0.05}
    db = tmp_path / "toy.duckdb"
    con = warehouse.connect(db)
    plant_dataset(con, "toy", [str(p) for p in range(1, 7)], list(quality))
    con.close()
    prices = tmp_path / "prices.toml"
    # Input tokens only: the reservation of a call is then what it costs (output is reserved at max_tokens).
    prices.write_text('[openai-compatible."judge"]\ninput = 100.0\noutput = 0.0\n')
    cli = CliRunner()
    with FakeLLMServer(quality) as server:
        base = ["judge", "--judge", f"openai-compatible:judge@{server.openai_base_url}", "--dataset", "toy"]
        base += ["--db", str(db), "--samples-per-order", "1", "--prices", str(prices), "--retry-wait", "0.01"]
        shown = cli.invoke(app, [*base, "--plan", "--json"])
        assert shown.exit_code == 0, shown.output
        plan = json.loads(shown.output)
        cap = (calls + 0.5) * plan["cost_usd"] / plan["calls"]
        adaptive = ["--adaptive", "--max-calls", "80", "--max-cost", f"{cap:.8f}", "--concurrency", "1"]
        done = cli.invoke(app, [*base, *adaptive, "--json"])
        assert done.exit_code == 0, done.output
        sent = server.snapshot().requests
    outcome = json.loads(done.output)
    assert outcome["stopped_by"] == "max-cost", outcome["message"]
    assert sent == outcome["stats"]["requests"] and outcome["stats"]["tokens_in"] * 100.0 / 1e6 <= cap
    # A call costs a little less than it reserves (the estimate counts message framing), so a few more fit.
    assert calls - 1 <= sent <= calls + 1 if calls < 60 else 60 <= sent < 72
    if calls < 60:
        assert outcome["ranking"] == [] and outcome["calls"] == []
        assert "before a rating" in outcome["message"], outcome["message"]
    else:
        assert sorted(outcome["ranking"]) == sorted(quality) and outcome["calls"] == [60, sent]
