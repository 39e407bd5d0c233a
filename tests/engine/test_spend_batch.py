"""Spend already in the ledger, and the audit's cost, are priced at what each attempt cost
(issue 13): lines a batch job carried at the model's batch prices, live attempts at the live
ones; a batch model priced for batch only is counted by the cap, not reported as unpriced.

The batch provider is the engine's fake (tests/engine/batch_fake.py), labelled as such.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from engine.audit import audit
from engine.dispatch import dispatch
from engine.ledger import Ledger
from engine.records import FOREIGN_NOTE
from engine.retry import RetryPolicy, gave_up_detail
from engine.scan import scan_attempts
from engine.spend import Prices, carried_by_batch, recorded_spend, unpriced
from providers.types import ModelConfig
from runs.audit import run_audit
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
POLICY = RetryPolicy(max_attempts=6, base_s=0.001, cap_s=0.002)
# Live at $10 per million tokens either way, batch at $1: the two can't be mistaken.
PRICED = ModelConfig(
    name=MODEL, provider="sim", model="m", dispatch="batch",
    price_in_per_mtok=10.0, price_out_per_mtok=10.0,
    batch_price_in_per_mtok=1.0, batch_price_out_per_mtok=1.0,
)  # fmt: skip


async def test_earlier_batch_lines_are_priced_at_batch_prices(
    tmp_path: Path, kit: type[Kit],
) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 40))
    run_dir = tmp_path / "run"
    done = await dispatch(
        plan, run_dir, {MODEL: PRICED}, {}, batch_clients={MODEL: FakeBatch()}, policy=POLICY,
        batch_poll_s=0.001, log_console=None,
    )  # fmt: skip
    assert done.complete
    attempts = scan_attempts(run_dir, ["tokens_in", "tokens_out", "detail"]).collect()
    # The mark the batch lane writes is the one recorded_spend looks for, on every line.
    assert attempts.select(carried_by_batch())["detail"].all()
    tokens = int(attempts["tokens_in"].sum()) + int(attempts["tokens_out"].sum())
    assert tokens > 0
    assert recorded_spend(run_dir, {MODEL: PRICED}) == pytest.approx(tokens * 1.0 / 1e6)
    report = audit(run_dir, prices={MODEL: Prices(10.0, 10.0)}, batch_prices={MODEL: Prices(1, 1)})
    assert report.totals.cost_usd == pytest.approx(tokens * 1.0 / 1e6)
    # A resume that turned the model live still prices what the jobs carried at batch prices.
    switched = ModelConfig(**{**PRICED.__dict__, "dispatch": "live"})
    assert recorded_spend(run_dir, {MODEL: switched}) == pytest.approx(tokens * 1.0 / 1e6)
    # Without batch prices, the batch lines count at the live ones (an upper bound).
    live_only = ModelConfig(**{**PRICED.__dict__, "batch_price_in_per_mtok": None,
                               "batch_price_out_per_mtok": None})  # fmt: skip
    assert recorded_spend(run_dir, {MODEL: live_only}) == pytest.approx(tokens * 10.0 / 1e6)


def test_live_and_batch_attempts_each_at_their_prices(tmp_path: Path, kit: type[Kit]) -> None:
    # kit attempts report 50 tokens in and 5 out; two live, three a batch job carried
    with Ledger.open(tmp_path) as ledger:
        for i in range(2):
            ledger.record_result(kit.attempt(f"l{i}", 1, MODEL, "ok"), None)
        for i in range(3):
            ledger.record_result(kit.attempt(f"b{i}", 1, MODEL, "ok", "[batch job j-1]"), None)
    # 2 x 55 tokens at $10 per million + 3 x 55 at $1 per million
    expected = (2 * 55 * 10.0 + 3 * 55 * 1.0) / 1e6
    assert recorded_spend(tmp_path, {MODEL: PRICED}) == pytest.approx(expected, rel=1e-12)
    # The audit prices the same way, from the arguments or from the frozen spec
    live, batch = {MODEL: Prices(10.0, 10.0)}, {MODEL: Prices(1.0, 1.0)}
    assert audit(tmp_path, prices=live, batch_prices=batch).totals.cost_usd == pytest.approx(
        expected, rel=1e-12
    )
    assert audit(tmp_path, prices=live).totals.cost_usd == pytest.approx(5 * 55 * 10.0 / 1e6)
    (tmp_path / "spec.toml").write_text(
        f'[[models]]\nname = "{MODEL}"\nprovider = "sim"\nprice_in = 10\nprice_out = 10\n'
        "batch_price_in = 1\nbatch_price_out = 1\n",
        encoding="utf-8",
    )
    report = run_audit(tmp_path)
    assert report.by_model[MODEL].cost_usd == pytest.approx(expected, rel=1e-12)


def test_a_batch_model_priced_for_batch_only_is_counted_by_the_cap() -> None:
    batch_only = ModelConfig(**{**PRICED.__dict__, "price_in_per_mtok": None,
                                "price_out_per_mtok": None})  # fmt: skip
    live_batch_only = ModelConfig(**{**batch_only.__dict__, "name": "x", "dispatch": "live"})
    assert unpriced([batch_only, live_batch_only]) == ["x"]


def test_a_live_attempt_that_mentions_a_batch_job_is_priced_live(
    tmp_path: Path, kit: type[Kit],
) -> None:
    """Only where the batch lane puts its mark (first, or in the closing note) does an attempt
    count as carried by a batch job: a live attempt whose provider's message mentions one is
    charged the live prices, not a tenth of them."""
    spent = "2 answer failures (budget 2, across runs)"
    live = [
        "HTTP 400 invalid_request_error: this model is offered as a batch job only",
        "HTTP 400: see batch job j-2]",
        "HTTP 429: slow down [omitted: seed]",
        gave_up_detail("not_json: see [batch job j-2]: no", spent),
    ]
    batch = [
        "[batch job j-1]",
        "[retry with seed 8; batch job arn:aws:bedrock:us-east-1:1:model-invocation-job/ab]",
        "batch job j-1 expired before this line ran: too late",
        "HTTP 500: boom [omitted: seed] [batch job projects/p/batchPredictionJobs/12]",
        # The engine's notes after the batch lane's: a line given up on its answer budget
        # (four such were priced live), a reply not in the provider's format.
        gave_up_detail("not_json: no JSON object [retry with seed 9; batch job batch_a1]", spent),
        f"not_json: <html> [batch job batch_a2] {FOREIGN_NOTE}",
    ]
    with Ledger.open(tmp_path) as ledger:
        for i, detail in enumerate(live + batch):
            ledger.record_result(kit.attempt(f"r{i}", 1, MODEL, "ok", detail), None)
    expected = (len(live) * 55 * 10.0 + len(batch) * 55 * 1.0) / 1e6
    assert recorded_spend(tmp_path, {MODEL: PRICED}) == pytest.approx(expected, rel=1e-12)
    prices, batch_prices = {MODEL: Prices(10.0, 10.0)}, {MODEL: Prices(1.0, 1.0)}
    report = audit(tmp_path, prices=prices, batch_prices=batch_prices)
    assert report.totals.cost_usd == pytest.approx(expected, rel=1e-12)
