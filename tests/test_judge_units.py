"""The judge's pure parts: templates, verdict parsing, spec strings, prices, the plan, caps, the write buffer."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eqarena import warehouse
from eqarena.judge.inputs import PlanError, choose_models, choose_prompts
from eqarena.judge.plan import build_plan
from eqarena.judge.templates import TEMPLATES_DIR, TemplateError, available_templates, load_template
from eqarena.judge.verdict import parse_verdict
from eqarena.llm.budget import Budget
from eqarena.llm.pricing import PriceError, estimate_message_tokens, load_prices
from eqarena.llm.providers import JudgeSpecError, make_provider, parse_judge_spec
from eqarena.warehouse.judgments import CellState, JudgmentRow, JudgmentWriter, cell_states, insert_judgments

pytestmark = pytest.mark.unit

FIVE = load_template("pairwise5")
THREE = load_template("pairwise3")


# ---------------------------------------------------------------- templates


def test_shipped_templates_load_with_distinct_hashes():
    assert {"pairwise5", "pairwise3"} <= set(available_templates())
    assert dict(FIVE.labels) == {"A>>B": 1.0, "A>B": 0.5, "A=B": 0.0, "B>A": -0.5, "B>>A": -1.0}
    assert dict(THREE.labels) == {"A>B": 1.0, "A=B": 0.0, "B>A": -1.0}
    assert len(FIVE.hash) == 16 and FIVE.hash != THREE.hash
    assert load_template("pairwise5").hash == FIVE.hash


def test_template_hash_follows_content(tmp_path):
    shipped = (TEMPLATES_DIR / "pairwise5.txt").read_text()
    source = tmp_path / "mine.txt"
    source.write_text(shipped)
    assert load_template(str(source)).hash == FIVE.hash
    source.write_text(shipped.replace("impartial", "fair"))
    assert load_template(str(source)).hash != FIVE.hash


def test_messages_put_a_first_and_keep_braces_verbatim():
    system, user = FIVE.messages("Q? {answer_b}", "first {answer_a}", "second")
    assert system["role"] == "system" and "[[A>>B]]" in system["content"]
    text = user["content"]
    assert "Q? {answer_b}" in text and "first {answer_a}" in text
    assert text.index("first {answer_a}") < text.index("second")


@pytest.mark.parametrize(
    "body, message",
    [
        ("[system]\nx [[A>B]] [[B>A]]\n[user]\n{question}{answer_a}{answer_b}\n", "labels"),
        ("# labels: A>B=1 B>A=-1\n[system]\nx [[A>B]] [[B>A]]\n[user]\n{question}{answer_a}\n", "{answer_b}"),
        ("# labels: A>B=2 B>A=-1\n[system]\nx\n[user]\n{question}{answer_a}{answer_b}\n", ":1: score of A>B"),
        ("# labels: A>B=1 A?B=0\n[system]\nx\n[user]\n{question}{answer_a}{answer_b}\n", ":1: bad label 'A?B=0'"),
        ("# labels: A>B=1 B>A=-1\nstray\n[system]\nx\n[user]\n", ":2: text before"),
        ("# labels: A>B=1 B>A=-1\n[system]\nonly [[A>B]]\n[user]\n{question}{answer_a}{answer_b}\n", "[[B>A]]"),
    ],
)
def test_bad_template_names_file_and_problem(tmp_path, body, message):
    path = tmp_path / "bad.txt"
    path.write_text(body)
    with pytest.raises(TemplateError) as err:
        load_template(str(path))
    assert str(path) in str(err.value) and message in str(err.value)


def test_unknown_template_lists_the_shipped_ones():
    with pytest.raises(TemplateError, match="pairwise3, pairwise5"):
        load_template("nope")


# ---------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    "output, label",
    [
        ("reasoning ... My final verdict is [[A>B]].", "A>B"),
        ("Not [[B>>A]] at all; final: [[A=B]]", "A=B"),
        ("[[ B >> A ]]", "B>>A"),
        ("so [[B<A]]", "A>B"),
        ("clearly [[a>>b]]", "A>>B"),
        ("[[A>>B]] then an invalid tail [[C]]", "A>>B"),
        ("[[A>B]]\n\nfinal [[B=A]]", "A=B"),
    ],
)
def test_parser_takes_the_final_valid_label(output, label):
    verdict = parse_verdict(output, FIVE)
    assert verdict is not None and verdict.label == label and verdict.score == dict(FIVE.labels)[label]


@pytest.mark.parametrize("output", ["", None, "A is better", "[[A]]", "[A>B]", "[[A>>>B]]", "[[A>>B]"])
def test_unparseable_output_is_none(output):
    assert parse_verdict(output, FIVE) is None


def test_three_class_rejects_five_label_strengths():
    assert parse_verdict("[[A>>B]]", THREE) is None
    assert parse_verdict("[[A>>B]] no, [[B>A]]", THREE).score == -1.0


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.text(alphabet=st.characters(blacklist_characters="[]"), max_size=200),
    first=st.sampled_from([label for label, _ in FIVE.labels]),
    last=st.sampled_from([label for label, _ in FIVE.labels]),
    suffix=st.text(alphabet=st.characters(blacklist_characters="[]"), max_size=50),
)
def test_parser_property_last_label_wins(prefix, first, last, suffix):
    verdict = parse_verdict(f"{prefix}[[{first}]]{prefix}[[{last}]]{suffix}", FIVE)
    assert verdict.label == last


# ---------------------------------------------------------------- specs, keys, prices


def test_spec_strings():
    assert parse_judge_spec("openai:gpt-4o-mini").judge_id == "openai:gpt-4o-mini"
    spec = parse_judge_spec("openai-compatible:qwen2.5-7b@http://127.0.0.1:8000/v1")
    assert (spec.provider, spec.model, spec.base_url, spec.judge_id) == (
        "openai-compatible",
        "qwen2.5-7b",
        "http://127.0.0.1:8000/v1",
        "openai-compatible:qwen2.5-7b",
    )
    assert parse_judge_spec("gemini:gemini-2.0-flash@http://localhost:9").base_url == "http://localhost:9"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("gpt-4o", "expected openai:MODEL"),
        ("anthropic:claude", "expected openai:MODEL"),
        ("openai:", "model name is empty"),
        ("openai-compatible:llama", "needs the server"),
        ("openai:gpt-4o@ftp://x", "must start with http"),
    ],
)
def test_bad_specs_are_explained(spec, message):
    with pytest.raises(JudgeSpecError, match=message):
        parse_judge_spec(spec)


def test_keys_come_only_from_the_environment(monkeypatch):
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(JudgeSpecError, match="OPENAI_API_KEY"):
        make_provider("openai:gpt-4o-mini")
    with pytest.raises(JudgeSpecError, match="GEMINI_API_KEY"):
        make_provider("gemini:gemini-2.0-flash")
    # A local server needs no key: a placeholder is sent.
    assert make_provider("openai-compatible:m@http://127.0.0.1:1/v1").client.api_key == "no-key"
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    assert make_provider("gemini:gemini-2.0-flash").spec.model == "gemini-2.0-flash"


def test_prices_lookup_and_override(tmp_path):
    table = load_prices()
    mini = table.lookup("openai", "gpt-4o-mini-2024-07-18")  # dated name -> longest prefix
    assert (mini.input_per_mtok, mini.output_per_mtok) == (0.15, 0.60)
    assert table.lookup("openai", "gpt-4o-2024-08-06").input_per_mtok == 2.50
    assert table.lookup("openai", "unknown-model") is None
    assert table.lookup("openai-compatible", "anything").cost(1e6, 1e6) == 0.0
    assert mini.cost(1e6, 1e6, batch=True) == pytest.approx(0.375)
    override = tmp_path / "prices.toml"
    override.write_text('batch_discount = 0.4\n[openai."unknown-model"]\ninput = 1.0\noutput = 2.0\n')
    table = load_prices(override)
    assert table.lookup("openai", "unknown-model").cost(2e6, 1e6) == pytest.approx(4.0)
    assert table.lookup("openai", "unknown-model").cost(2e6, 1e6, batch=True) == pytest.approx(1.6)
    override.write_text('[openai."x"]\ninput = 1.0\n')
    with pytest.raises(PriceError, match=r'prices.toml: \[openai."x"\] needs exactly'):
        load_prices(override)


# ---------------------------------------------------------------- plan


def _inputs(n_prompts=3, models=("m1", "m2", "m3")):
    prompts = {str(p): f"question {p}" for p in range(1, n_prompts + 1)}
    responses = {(p, m): f"answer {m} {p}" for p in prompts for m in models}
    return prompts, list(models), responses


def test_plan_counts_prompts_pairs_orders_samples():
    prompts, models, responses = _inputs()
    plan = build_plan(
        judge="j",
        template=FIVE,
        dataset="d",
        prompts=prompts,
        models=models,
        responses=responses,
        held={},
        samples_per_order=4,
        multi_sample=True,
    )
    # 3 prompts x 3 unordered pairs x 2 orders x 4 samples
    assert plan.samples == plan.wanted_samples == 3 * 3 * 2 * 4
    assert plan.request_count == 3 * 3 * 2
    cells = [r.cell for r in plan.requests]
    assert len(set(cells)) == len(cells) == 18
    assert ("1", "m1", "m2") in cells and ("1", "m2", "m1") in cells
    assert all(r.sample_indices == (0, 1, 2, 3) for r in plan.requests)
    single = build_plan(
        judge="j",
        template=FIVE,
        dataset="d",
        prompts=prompts,
        models=models,
        responses=responses,
        held={},
        multi_sample=False,
    )
    assert single.request_count == single.samples == 72
    assert single.tokens_in == 4 * plan.tokens_in  # one prompt per sample instead of per cell
    assert plan.tokens_out == 72 * FIVE.expected_output_tokens


def test_plan_subtracts_ok_and_pending_and_reasks_unparsed_and_errors():
    prompts, models, responses = _inputs(1, ("a", "b"))
    held = {
        ("1", "a", "b"): CellState(ok=3, unparsed=1, error=1, next_index=5),
        ("1", "b", "a"): CellState(ok=1, pending=2, next_index=4),
    }
    plan = build_plan(
        judge="j",
        template=FIVE,
        dataset="d",
        prompts=prompts,
        models=models,
        responses=responses,
        held=held,
        samples_per_order=4,
    )
    by_cell = {r.cell: r for r in plan.requests}
    assert by_cell[("1", "a", "b")].sample_indices == (5,)
    assert by_cell[("1", "a", "b")].unparsed_allowance == 3
    assert by_cell[("1", "b", "a")].sample_indices == (4,)
    assert plan.done_samples == 4 and plan.pending_samples == 2 and plan.samples == 2


def test_plan_gives_up_after_max_unparsed_and_reports_it():
    prompts, models, responses = _inputs(1, ("a", "b"))
    held = {("1", "a", "b"): CellState(ok=0, unparsed=4, next_index=4)}
    plan = build_plan(
        judge="j",
        template=FIVE,
        dataset="d",
        prompts=prompts,
        models=models,
        responses=responses,
        held=held,
        samples_per_order=4,
    )
    assert plan.given_up == (("1", "a", "b"),)
    assert [r.cell for r in plan.requests] == [("1", "b", "a")]
    more = build_plan(
        judge="j",
        template=FIVE,
        dataset="d",
        prompts=prompts,
        models=models,
        responses=responses,
        held=held,
        samples_per_order=4,
        max_unparsed=6,
    )
    assert {r.cell for r in more.requests} == {("1", "a", "b"), ("1", "b", "a")}


def test_plan_skips_cells_without_answers_and_chunks_by_prompt():
    prompts, models, responses = _inputs(5)
    del responses[("2", "m3")]
    plan = build_plan(
        judge="j",
        template=FIVE,
        dataset="d",
        prompts=prompts,
        models=models,
        responses=responses,
        held={},
        samples_per_order=1,
    )
    assert plan.unjudgeable == (("2", "m3"),)
    assert plan.samples == 5 * 6 - 4
    chunks = plan.chunks(2)
    assert [sorted({r.prompt_id for r in c}) for c in chunks] == [["1", "2"], ["3", "4"], ["5"]]
    assert sum(len(c) for c in chunks) == len(plan.requests)


def test_plan_cost_uses_the_price():
    prompts, models, responses = _inputs()
    price = load_prices().lookup("openai", "gpt-4o-mini")
    plan = build_plan(
        judge="j", template=FIVE, dataset="d", prompts=prompts, models=models, responses=responses, held={}, price=price
    )
    assert plan.cost_usd == pytest.approx((plan.tokens_in * 0.15 + plan.tokens_out * 0.60) / 1e6)
    first = plan.requests[0]
    assert first.tokens_in == estimate_message_tokens(FIVE.messages("question 1", "answer m1 1", "answer m2 1"))


def test_prompt_and_model_choice():
    assert choose_prompts(["10", "2", "1", "b", "a"], 3) == ["1", "2", "10"]
    assert choose_models(["m2", "m1"], None, "d") == ["m1", "m2"]
    assert choose_models(["m2", "m1", "m3"], ["m3", "m1"], "d") == ["m3", "m1"]
    with pytest.raises(PlanError, match="no responses of zz in dataset 'd'; models there: m1, m2"):
        choose_models(["m2", "m1"], ["m1", "zz"], "d")
    with pytest.raises(PlanError, match="at least 2 models"):
        build_plan(
            judge="j",
            template=FIVE,
            dataset="d",
            prompts={"1": "q"},
            models=["m1"],
            responses={("1", "m1"): "a"},
            held={},
        )


# ---------------------------------------------------------------- caps and the write buffer


def test_budget_refuses_what_would_pass_a_cap():
    budget = Budget(max_cost_usd=1.0, max_samples=10)
    assert budget.reserve(0.4, 4) and budget.reserve(0.4, 4)
    assert not budget.reserve(0.4, 1) and budget.exhausted_by == "max-cost"
    budget.settle(0.4, 4, 0.1, 4)
    assert budget.spent_usd == pytest.approx(0.1)
    calls = Budget(max_samples=3)
    assert calls.reserve(0, 3) and not calls.reserve(0, 1) and calls.exhausted_by == "max-calls"


def _row(i: int, status: str = "ok") -> JudgmentRow:
    return JudgmentRow(
        "j", "t", "d", "1", "a", "b", i, status, "A>B" if status == "ok" else None, 0.5 if status == "ok" else None
    )


def test_writer_commits_within_the_delay_and_in_batches(db_path):
    con = warehouse.connect(db_path)
    writer = JudgmentWriter(con, max_delay_s=0.2, max_rows=5)
    writer.add([_row(0)])
    assert writer.flush_due() == 0 and writer.buffered == 1
    time.sleep(0.25)
    assert writer.flush_due() == 1 and writer.buffered == 0
    writer.add([_row(i) for i in range(1, 6)])  # reaching max_rows flushes at once
    assert writer.buffered == 0 and writer.commits == 2
    reader = warehouse.connect(db_path)  # another connection sees the committed rows
    assert reader.execute("SELECT count(*) FROM judgments").fetchone()[0] == 6
    writer.add([_row(3)])  # already stored: idempotent
    assert writer.flush() == 0 and writer.rows_written == 6


def test_cell_states_summarise_judgments(db_path):
    con = warehouse.connect(db_path)
    insert_judgments(con, [_row(0), _row(1), _row(2, "unparsed"), _row(5, "error")])
    states = cell_states(con, "j", "t", "d")
    assert states == {("1", "a", "b"): CellState(ok=2, unparsed=1, error=1, pending=0, next_index=6)}
    assert cell_states(con, "j", "other-template", "d") == {}


def test_progress_bar_shows_done_total_rate_eta_and_spend():
    import io

    from rich.console import Console

    from eqarena.llm.progress import JudgeProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    with JudgeProgress(10, label="openai:gpt-4o-mini", console=console) as bar:
        bar.advance(4, 0.0123)
        bar.add_to_total(2)
        bar.advance(8, 0.0456)
    text = out.getvalue()
    assert "openai:gpt-4o-mini" in text and "12/12" in text and "$0.0456" in text and "/min" in text and "eta" in text
    disabled = io.StringIO()
    with JudgeProgress(10, enabled=False, console=Console(file=disabled, force_terminal=True)) as bar:
        bar.advance(10, 1.0)
    assert disabled.getvalue() == ""


def test_retry_after_header_forms():
    import email.utils

    import httpx2

    from eqarena.llm.providers import retry_after_seconds

    class Failed(Exception):
        def __init__(self, headers):
            self.response = httpx2.Response(429, headers=headers)

    assert retry_after_seconds(Failed({"retry-after-ms": "250", "retry-after": "1"})) == 0.25
    assert retry_after_seconds(Failed({"retry-after": "2"})) == 2.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after_seconds(Failed({"retry-after": when})) <= 30
    assert retry_after_seconds(Failed({"retry-after": "soon"})) is None
    assert retry_after_seconds(Failed({})) is None
    assert retry_after_seconds(ValueError("no response")) is None
