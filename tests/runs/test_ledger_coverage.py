"""The report's coverage counts each planned query once (`runs.report.data.ledger_coverage`).

A referee's run asked one question in two families of `families/isolated`, so
`plan_members.parquet` held 1,021 rows of a model's 1,020 queries: the model's coverage in
summary.json and models.csv read 1014/1021 where `audit` said 1,014 of 1,020 accepted, and
a model answering the doubled query read 1020/1021 where it had answered 1019 of 1020.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from engine.ledger import Ledger
from engine.records import AttemptRecord, ResponseRecord
from runs.report.data import ledger_coverage

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _accept(ledger: Ledger, request_id: str, model: str) -> None:
    attempt = AttemptRecord(
        request_id=request_id, attempt=1, model=model, provider="sim", started_at=T0,
        elapsed_ms=1.0, outcome="ok", http_status=200, provider_request_id=None,
        retry_after_s=None, tokens_in=1, tokens_out=1, detail="",
    )
    response = ResponseRecord(
        request_id=request_id, model=model, arm="a", unit="u", pass_=0, events=["e"],
        keys=["probability"], raw_text='{"probability": 0.5}', values=[0.5],
        finish_reason="stop", tokens_in=1, tokens_out=1, attempts=1, accepted_at=T0,
    )
    assert ledger.record_result(attempt, response)


@pytest.mark.parametrize("doubled_answered", [False, True])
def test_a_query_serving_two_members_counts_once(tmp_path: Path, doubled_answered: bool) -> None:
    # Four queries of model m; q0 serves two families of the family arm and a unit of the
    # paper arm, q3 two units of the paper arm; three of the four are answered.
    members = [
        ("q0", "families/isolated", "fam1"), ("q0", "families/isolated", "fam2"),
        ("q1", "families/isolated", "fam1"), ("q2", "families/isolated", "fam2"),
        ("q3", "paper", "u1"), ("q0", "paper", "u1"), ("q3", "paper", "u2"),
    ]  # fmt: skip
    pl.DataFrame(
        {
            "request_id": [r for r, _, _ in members], "model": "m",
            "arm": [a for _, a, _ in members], "unit": [u for _, _, u in members], "pass": 0,
        }
    ).write_parquet(tmp_path / "plan_members.parquet")
    answered = ["q0", "q1", "q3"] if doubled_answered else ["q1", "q2", "q3"]
    ledger = Ledger.open(tmp_path)
    for request_id in answered:
        _accept(ledger, request_id, "m")
    ledger.close()
    by_model, by_arm = ledger_coverage(tmp_path)
    assert by_model == {"m": pytest.approx(3 / 4)}  # 3 of 4 queries, whichever is unanswered
    assert by_arm[("m", "paper")] == pytest.approx(1.0 if doubled_answered else 0.5)
    # The family rule counts families: q0 unanswered leaves both of its families unanswered.
    assert by_arm[("m", "families/isolated")] == pytest.approx(
        0.5 if doubled_answered else 0.0
    )
