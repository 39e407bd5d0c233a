"""The running spend cap: spend counted from reported usage stops new attempts before it could
pass the budget, counts earlier runs of the folder, and a resume with a higher cap finishes."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.dispatch import dispatch
from engine.lanes import LaneState
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from engine.spend import (
    DEFAULT_OUTPUT_CAP,
    Prices,
    SpendCap,
    prompt_chars,
    recorded_spend,
    worst_case_cost,
    worst_case_cost_of,
)
from providers.sim.server import SimHandle, start_sim
from providers.types import ModelConfig

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

# Truncations here are random faults, not a model repeating itself: give them every attempt
# (the answer-failure budget is tested in tests/local_model/test_answer_retries.py).
# Ten of each: with six, a request truncated six times running (0.15**6 in arrival order)
# left a run incomplete in about 5e-4 of runs; with ten, about 3e-7.
FAST = RetryPolicy(
    max_attempts=10, base_s=0.01, cap_s=0.05, max_retry_after_s=0.05, max_answer_failures=10
)
class _Prices(TypedDict):
    price_in_per_mtok: float
    price_out_per_mtok: float


PRICES: _Prices = {"price_in_per_mtok": 800.0, "price_out_per_mtok": 2400.0}
CONCURRENCY = 4


def ledger_spend(run_dir: Path, prices: Prices, model: str) -> float:
    attempts = scan_attempts(run_dir).filter(pl.col("model") == model).collect()
    return sum(
        prices.cost(i, o)
        for i, o in zip(attempts["tokens_in"], attempts["tokens_out"], strict=True)
    )


async def test_cap_stops_part_way_and_resume_with_higher_cap_finishes(
    tmp_path: Path, kit: type[Kit]
) -> None:
    prices = Prices(PRICES["price_in_per_mtok"], PRICES["price_out_per_mtok"])
    rows = kit.plan_rows("paid", 40)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run = tmp_path / "run"
    # Retries cost too: a fault profile makes some attempts fail and still report usage.
    async with await start_sim(faults="output_cap=0.15", seed=3) as sim:
        config, adapter = kit.sim_model("paid", sim.root_url, concurrency=CONCURRENCY, **PRICES)
        worst = max(worst_case_cost(prices, config, r["system"], r["user"]) for r in rows)
        # A retry after a truncation is sent, and reserved, at twice the cap.
        doubled = 2 * (config.max_tokens or DEFAULT_OUTPUT_CAP)
        worst_retry = max(
            worst_case_cost(prices, config, r["system"], r["user"], doubled) for r in rows
        )
        # Learn what one answer costs from a throwaway run, then cap at ~half the plan.
        probe = await dispatch(
            kit.write_plan(tmp_path / "probe.parquet", rows[:4]),
            tmp_path / "probe",
            {"paid": config},
            {"paid": adapter},
            policy=FAST,
            log_console=None,
        )
        assert probe.complete
        per_answer = ledger_spend(tmp_path / "probe", prices, "paid") / 4
        cap = per_answer * 20

        console = io.StringIO()
        first = await dispatch(
            plan,
            run,
            {"paid": config},
            {"paid": adapter},
            policy=FAST,
            log_console=console,
            budget_usd=cap,
        )
        spent = ledger_spend(run, prices, "paid")
        attempts = scan_attempts(run).collect()
        cut = attempts.filter(pl.col("outcome") == "truncated")
        assert cut.height > 0 and cut["tokens_out"].sum() > 0  # failed attempts are paid too
        assert first.spend_cap_reached and not first.complete
        lane = first.lanes["paid"]
        assert lane.state is LaneState.CANCELLED and "spend cap reached" in lane.message
        assert 5 <= lane.accepted < 40, first.lines()  # stopped part-way, not at the start
        # Never past the cap by more than the attempts that can be in flight at once.
        assert spent <= cap + CONCURRENCY * worst
        # In fact the worst-case reservations keep it under the cap itself.
        assert spent <= cap + 1e-12
        # The room left is less than one more worst-case attempt (a retry's, at its doubled
        # cap): the budget was used.
        assert cap - spent < worst_retry
        assert first.spend is not None
        assert first.spend.spent_usd == pytest.approx(spent, rel=1e-9)
        assert any(line.startswith("spend cap reached: $") for line in first.lines())

        # The same cap again: the ledger's earlier spend counts, so (almost) nothing is sent.
        again = await dispatch(
            plan,
            run,
            {"paid": config},
            {"paid": adapter},
            policy=FAST,
            log_console=None,
            budget_usd=cap,
        )
        assert again.spend is not None
        assert again.spend.spent_before_usd == pytest.approx(spent, rel=1e-9)
        assert again.spend_cap_reached and again.attempts <= CONCURRENCY

        resumed = await dispatch(
            plan,
            run,
            {"paid": config},
            {"paid": adapter},
            policy=FAST,
            log_console=None,
            budget_usd=cap * 10,
        )
    assert resumed.complete and not resumed.spend_cap_reached, resumed.lines()
    responses = scan_responses(run).collect()
    assert responses.height == 40 and responses["request_id"].n_unique() == 40
    assert recorded_spend(run, {"paid": config}) == pytest.approx(
        ledger_spend(run, prices, "paid"), rel=1e-9
    )


async def test_unpriced_models_are_not_counted_and_said_so_once(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """The summary says which models the cap does not count; the console said it twice, first
    as the log's raw "dutchbook warning: spend not counted: models ...", which the log file
    keeps."""
    plan = kit.write_plan(
        tmp_path / "plan.parquet", kit.plan_rows("paid", 6) + kit.plan_rows("free", 6)
    )
    paid = kit.sim_model("paid", sim.root_url, **PRICES)
    free = kit.sim_model("free", sim.root_url)
    console = io.StringIO()
    summary = await dispatch(
        plan,
        tmp_path / "run",
        {"paid": paid[0], "free": free[0]},
        {"paid": paid[1], "free": free[1]},
        policy=FAST,
        log_console=console,
        budget_usd=100.0,
    )
    assert summary.complete and not summary.spend_cap_reached
    assert summary.unpriced == ["free"]
    lines = summary.lines()
    notes = [line for line in lines if "not counted toward the cap" in line]
    assert len(notes) == 1 and "free" in notes[0] and "paid" not in notes[0]
    assert "not counted" not in console.getvalue()
    logged = (tmp_path / "run" / "logs" / "engine.jsonl").read_text(encoding="utf-8")
    assert '"event":"spend_not_counted"' in logged and '"models":["free"]' in logged
    assert summary.spend is not None
    expected = ledger_spend(
        tmp_path / "run", Prices(PRICES["price_in_per_mtok"], PRICES["price_out_per_mtok"]), "paid"
    )
    assert 0 < summary.spend.spent_usd == pytest.approx(expected, rel=1e-9)


@given(
    budget=st.floats(0.0, 5.0),
    costs=st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.0, 1.0)), min_size=1, max_size=40),
    workers=st.integers(1, 6),
)
def test_spend_never_passes_the_budget_and_is_not_abandoned_early(
    budget: float, costs: list[tuple[float, float]], workers: int
) -> None:
    """Attempts of worst case `w` really costing `w * f` (f <= 1), run by concurrent workers."""

    async def scenario() -> tuple[SpendCap, list[float]]:
        cap = SpendCap(budget)
        queue = list(costs)
        refused: list[float] = []

        async def worker() -> None:
            while queue:
                worst, fraction = queue.pop()
                if not await cap.reserve(worst):
                    refused.append(worst)
                    return
                await asyncio.sleep(0)  # in flight: other workers run meanwhile
                cap.settle(worst, worst * fraction)

        await asyncio.gather(*(worker() for _ in range(workers)))
        return cap, refused

    cap, refused = asyncio.run(scenario())
    assert cap.spent_usd <= budget + 1e-9
    assert cap.in_flight == 0 and cap.reserved_usd == 0.0
    if refused:
        assert cap.reached
        # the first refusal was for an attempt whose worst case truly did not fit
        assert any(cap.spent_usd + w > budget - 1e-9 for w in refused)


def test_a_cap_reached_by_a_worst_case_says_why_and_what_lowers_it() -> None:
    """A cap between a campaign's typical and worst cost stopped after one answer at 3% of
    the budget, saying only "spend cap reached: $0.0005 of $0.0175", and so on every resume."""

    async def scenario() -> SpendCap:
        cap = SpendCap(0.01)
        assert await cap.reserve(0.009)
        cap.settle(0.009, 0.002)
        assert not await cap.reserve(0.009)
        return cap

    cap = asyncio.run(scenario())
    assert cap.reached and cap.message() == (
        "spend cap reached: $0.0020 of $0.0100; the next attempt could cost up to $0.0090 (its "
        "prompt and its whole output cap: a lower max_tokens reserves less), more than the "
        "$0.0080 left"
    )
    spent = SpendCap(0.01)
    spent.hold(0.009)  # a batch job an earlier run created, at its worst
    spent.settle(0.009, 0.011)  # its lines reportedly cost more: no next attempt is at stake
    assert spent.message() == "spend cap reached: $0.0110 of $0.0100"


def test_a_worst_case_a_little_over_the_room_left_is_said_apart_from_it() -> None:
    """A tester: "could cost up to $0.0058 (...), more than the $0.0058 left" ($0.005846
    against $0.005771); and room held by batch jobs left at the provider is said."""

    async def scenario() -> SpendCap:
        cap = SpendCap(0.02)
        cap.hold(0.014229)
        cap.commit(0.014229)  # a created job its halted lane left at the provider
        assert not await cap.reserve(0.005846)
        return cap

    assert asyncio.run(scenario()).message() == (
        "spend cap reached: $0.0000 of $0.0200, and up to $0.0142 more held by batch jobs "
        "not yet collected; the next attempt could cost up to $0.005846 (its prompt and its "
        "whole output cap: a lower max_tokens reserves less), more than the $0.005771 left"
    )


#: Prompts whose lengths a byte count or a UTF-16 count would get wrong, an empty and a
#: missing system text, and a long one.
VARIED_PROMPTS: list[tuple[str | None, str]] = [
    ("", "plain"),
    (None, "a system text the plan leaves null"),
    ("é composed, e\u0301 decomposed", "天气 and a rain cloud 🌧️ (outside the BMP), ẞ"),
    ("S" * 75, "U" * 20_001),
]


@given(st.lists(st.tuples(st.none() | st.text(), st.text()), max_size=6))
def test_prompt_lengths_price_a_worst_case_as_the_texts_do(
    drawn: list[tuple[str | None, str]],
) -> None:
    """A capped resume prices the lines of the batch jobs an earlier run created from their
    prompts' lengths, read in polars (`prompt_chars`), not from the texts (hundreds of MB as
    Python strings at paper scale): the same dollars, to the last bit."""
    pairs = VARIED_PROMPTS + drawn
    frame = pl.DataFrame(
        {"system": [s for s, _ in pairs], "user": [u for _, u in pairs]},
        schema={"system": pl.String, "user": pl.String},
    )
    chars = frame.select(prompt_chars()).to_series().to_list()
    prices = Prices(0.15, 0.6)
    for cap in (None, 333):
        config = ModelConfig(name="m", provider="sim", model="m", max_tokens=cap)
        for (system, user), length in zip(pairs, chars, strict=True):
            assert length == len(system or "") + len(user)
            for sent_cap in (None, 1_000):
                assert worst_case_cost_of(prices, config, length, sent_cap) == worst_case_cost(
                    prices, config, system or "", user, sent_cap
                )


async def test_a_stop_while_the_cap_reads_the_ledger_still_counts_the_answers_before(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch, sim: SimHandle
) -> None:
    """A Ctrl-C while the spend cap read what the folder had already spent, before any lane
    started, ended with "0 answers accepted (0 already accepted, 10 still unanswered", of a
    folder holding 6 of the 10 answers: a lane read its plan, and counted what was answered
    before, only as it asked, and a lane stopped at its start read none of it."""
    import engine.dispatch

    config, adapter = kit.sim_model("paid", sim.root_url, **PRICES)
    rows = kit.plan_rows("paid", 10)
    run = tmp_path / "run"
    first = await dispatch(
        kit.write_plan(tmp_path / "first.parquet", rows[:6]), run, {"paid": config},
        {"paid": adapter}, policy=FAST, log_console=None,
    )  # fmt: skip
    assert first.complete and first.accepted == 6
    stop = asyncio.Event()

    def stopped_while_read(*args: object) -> float:
        stop.set()  # the signal handler's work, as Ctrl-C arrives during the read
        return recorded_spend(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.dispatch, "recorded_spend", stopped_while_read)
    again = await dispatch(
        kit.write_plan(tmp_path / "plan.parquet", rows), run, {"paid": config},
        {"paid": adapter}, policy=FAST, log_console=None, stop_event=stop, budget_usd=100.0,
    )  # fmt: skip
    assert stop.is_set() and again.attempts == 0
    assert again.lanes["paid"].state is LaneState.CANCELLED, again.lanes["paid"].message
    assert again.already_accepted == 6 and again.unaccepted == 4
    assert "(6 already accepted, 4 still unanswered" in again.lines()[0]


async def test_a_stop_of_a_first_run_reads_nothing_more_of_its_plan(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch, sim: SimHandle
) -> None:
    """A folder with no earlier run has no earlier answers among the rows its lanes did not
    read: a stop does not wait on reading them through (seconds at the paper's scale)."""
    import engine.dispatch

    config, adapter = kit.sim_model("paid", sim.root_url, **PRICES)
    stop = asyncio.Event()

    def stopped_while_read(*args: object) -> float:
        stop.set()
        return recorded_spend(*args)  # type: ignore[arg-type]

    def never(*args: object) -> int:
        raise AssertionError("a first run's stop read the rest of its plan")

    monkeypatch.setattr(engine.dispatch, "recorded_spend", stopped_while_read)
    monkeypatch.setattr(engine.dispatch, "_accepted_unread", never)
    summary = await dispatch(
        kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("paid", 10)), tmp_path / "run",
        {"paid": config}, {"paid": adapter}, policy=FAST, log_console=None, stop_event=stop,
        budget_usd=100.0,
    )  # fmt: skip
    assert stop.is_set() and summary.attempts == 0 and summary.already_accepted == 0
    assert summary.unaccepted == 10, summary.lines()
    lane = summary.lanes["paid"]  # a read of the plan raised: the lane ended in an error
    assert lane.state is LaneState.CANCELLED and "error" not in lane.message, lane.message


def test_every_lane_the_cap_stopped_says_the_runs_figure_at_its_end(tmp_path: Path) -> None:
    """Each lane the cap stopped said "spend cap reached: $X of $Y ..." as the cap stood when
    that lane stopped: a lane stopped while another's attempt was still in flight said $0.30,
    the other lane and the spend line $0.70. Once the dispatch ends, every lane, in
    `lanes.json`, says the cap as the spend line does; in the summary, each says "spend cap
    reached", what followed kept, the spend line alone giving the figures (each lane gave
    them again)."""
    from engine.dispatch import DispatchSummary, _Run
    from engine.lanefile import read_lane_states
    from engine.lanes import LaneControl, LaneStats
    from engine.ledger import Ledger
    from engine.logs import EngineLog

    class Capped(LaneControl):
        def __init__(self, name: str, spend: SpendCap) -> None:
            self.stats, self.spend = LaneStats(model=name, provider="p"), spend

    cap = SpendCap(1.0)
    first, second = Capped("a", cap), Capped("b", cap)

    async def scenario() -> None:
        assert await cap.reserve(0.5)  # b's attempt, in flight
        assert await cap.reserve(0.3)
        cap.settle(0.3, 0.3)
        assert not await cap.reserve(0.8)  # a's next: the cap is reached, and a stops
        first._cancel_at_the_cap()
        cap.settle(0.5, 0.4)  # b's attempt comes back; then b stops
        second._cancel_at_the_cap()
        tail = "; 1 batch job not yet collected from the provider"  # as a batch lane adds it
        second.stats.message += tail
        second.stats.reason += tail

    asyncio.run(scenario())
    assert "$0.3000 of $1.00" in first.stats.message  # as the cap stood when a stopped
    run_dir = tmp_path / "run"
    summary = DispatchSummary(lanes={"a": first.stats, "b": second.stats}, spend=cap)
    run = _Run(tmp_path / "plan.parquet", run_dir, Ledger.open(run_dir), EngineLog(run_dir),
               None, 10, False, (10.0, 100))  # fmt: skip
    run.close(summary, 0.0)
    said = cap.message()
    assert said.startswith("spend cap reached: $0.7000 of $1.00; the next attempt could cost")
    tail = "; 1 batch job not yet collected from the provider"
    assert [line for line in summary.lines() if "spend cap" in line] == [
        "  a: cancelled, 0/0 done — spend cap reached",
        f"  b: cancelled, 0/0 done — spend cap reached{tail}",
        said,
    ]
    lanes = read_lane_states(run_dir)
    assert lanes is not None
    assert [lane["message"] for lane in lanes["lanes"].values()] == [said, said + tail]
