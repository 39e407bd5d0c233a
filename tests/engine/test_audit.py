"""`engine.audit`: the one definition of a retry, checked against a plain-Python count."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine.audit import CAUSES, attempt_timeline, audit, retry_sentence
from engine.ledger import Ledger
from engine.records import AttemptRecord, ResponseRecord
from engine.spend import Prices

T0 = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)


def _attempt(
    rid: str, n: int, model: str, outcome: str, detail: str = "", *, provider: str = "sim",
    elapsed: float = 5.0, seconds: float | None = None, tokens: tuple[int, int] = (50, 5),
) -> AttemptRecord:
    return AttemptRecord(
        request_id=rid, attempt=n, model=model, provider=provider,
        started_at=T0 + timedelta(seconds=10 * n if seconds is None else seconds),
        elapsed_ms=elapsed, outcome=outcome, http_status=None, provider_request_id=None,
        retry_after_s=None, tokens_in=tokens[0], tokens_out=tokens[1], detail=detail,
    )


def _response(rid: str, n: int, model: str) -> ResponseRecord:
    return ResponseRecord(
        request_id=rid, model=model, arm="baseline", unit="u", pass_=0, events=["e"],
        keys=["probability"], raw_text='{"probability": 0.5}', values=[0.5],
        finish_reason="stop", tokens_in=50, tokens_out=5, attempts=n, accepted_at=T0,
    )


def _plan(run_dir: Path, per_model: dict[str, int]) -> None:
    rows = [
        {"request_id": f"{model}-{i}", "model": model, "arm": "baseline", "unit": "u"}
        for model, n in per_model.items()
        for i in range(n)
    ]
    pl.DataFrame(rows).write_parquet(run_dir / "plan.parquet")


def _scenario(ledger: Ledger) -> None:
    """alpha (groq): a request accepted after two rate limits and a 5xx; one accepted at
    once; one given up after a timeout then an interrupted dispatch; one never attempted.
    beta (bedrock): a parser rejection then accepted; a malformed reply given up; two auth
    errors (permanent); a refused duplicate answer."""
    for n, outcome in enumerate(("rate_limit", "rate_limit", "provider_error"), start=1):
        ledger.record_result(_attempt("alpha-0", n, "alpha", outcome, provider="groq"), None)
    ledger.record_result(
        _attempt("alpha-0", 4, "alpha", "ok", provider="groq", elapsed=100.0),
        _response("alpha-0", 4, "alpha"),
    )
    ledger.record_result(
        _attempt("alpha-1", 1, "alpha", "ok", provider="groq", elapsed=300.0),
        _response("alpha-1", 1, "alpha"),
    )
    ledger.record_result(_attempt("alpha-2", 1, "alpha", "timeout", provider="groq"), None)
    ledger.record_result(_attempt("alpha-2", 2, "alpha", "interrupted", provider="groq"), None)
    ledger.record_result(
        _attempt("beta-0", 1, "beta", "invalid_response", "not_a_number: 'x'",
                 provider="bedrock"),
        None,
    )
    ledger.record_result(
        _attempt("beta-0", 2, "beta", "ok", provider="bedrock", elapsed=20.0),
        _response("beta-0", 2, "beta"),
    )
    ledger.record_result(
        _attempt("beta-1", 1, "beta", "invalid_response", "reply has no choices",
                 provider="bedrock"),
        None,
    )
    for n in (1, 2):
        ledger.record_result(_attempt("beta-2", n, "beta", "auth_error", provider="bedrock"), None)
    ledger.record_result(
        _attempt("beta-3", 1, "beta", "ok", provider="bedrock", elapsed=40.0),
        _response("beta-3", 1, "beta"),
    )
    # the same request answered again: the ledger refuses the second acceptance
    ledger.record_result(
        _attempt("beta-3", 2, "beta", "ok", provider="bedrock", elapsed=50.0),
        _response("beta-3", 2, "beta"),
    )


def test_every_attempt_not_accepted_is_one_retry_attempt(tmp_path: Path) -> None:
    _plan(tmp_path, {"alpha": 4, "beta": 4})
    with Ledger.open(tmp_path) as ledger:
        _scenario(ledger)
        live = audit(tmp_path)  # journal only, read while the writer holds the ledger
    done = audit(tmp_path)  # compacted into shards
    for report in (live, done):
        alpha, beta, total = report.by_model["alpha"], report.by_model["beta"], report.totals
        assert (alpha.requests, alpha.accepted, alpha.attempts) == (4, 2, 7)
        assert alpha.retry_attempts == 5 and alpha.requests_retried == 2
        assert {k: v for k, v in alpha.retries_by_cause.items() if v} == {
            "rate_limit": 2, "provider_error": 1, "timeout": 1, "interrupted": 1,
        }
        assert {k: v for k, v in alpha.given_up.items() if v} == {"interrupted": 1}
        assert alpha.not_attempted == 1
        assert (beta.requests, beta.accepted, beta.attempts) == (4, 2, 7)
        assert beta.retry_attempts == 5 and beta.requests_retried == 4
        assert {k: v for k, v in beta.retries_by_cause.items() if v} == {
            "invalid_response": 2, "auth_error": 2, "duplicate": 1,
        }
        assert {k: v for k, v in beta.invalid_response_subcauses.items() if v} == {
            "not_a_number": 1, "malformed_reply": 1,
        }
        assert {k: v for k, v in beta.given_up.items() if v} == {
            "invalid_response": 1, "auth_error": 1,
        }
        assert total.retry_attempts == 10 and total.requests_retried == 6
        assert total.requests == 8 and total.accepted == 4 and total.attempts == 14
        assert list(total.retries_by_cause) == list(CAUSES)
        assert report.providers == {"alpha": "groq", "beta": "bedrock"}
        assert report.by_provider["groq"].retries_by_cause == alpha.retries_by_cause
        assert report.by_provider["bedrock"].given_up == beta.given_up
        assert alpha.latency_ms["p50"] == pytest.approx(200.0)  # accepted: 100 and 300 ms
        assert total.latency_ms["p50"] == pytest.approx(np.percentile([100, 300, 20, 40], 50))
        assert total.tokens_in == 14 * 50 and total.cost_usd is None
    # largest first; ties in the table's cause order
    assert done.sentence == (
        "10 retry attempts across 6 requests out of 8, attributed to rate limits (2), "
        "invalid responses (2), authentication errors (2), provider errors (1), timeouts (1), "
        "interrupted dispatches (1), and duplicate answers (1)."
    )


def test_accepted_attempt_is_the_one_the_response_names(tmp_path: Path) -> None:
    """After a lenient re-parse accepted a reply recorded `invalid_response`, that attempt is
    not a retry; the later `ok` becomes a duplicate. A reply recorded `ok` that the current
    parser rejects (no response row) is an invalid response, rejected on re-parse."""
    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(
            _attempt("r-0", 1, "m", "invalid_response", "not_json: 11/36"),
            _response("r-0", 1, "m"),
        )
        ledger.record_result(_attempt("r-0", 2, "m", "ok"), None)
        ledger.record_result(_attempt("r-1", 1, "m", "ok"), None)
    report = audit(tmp_path).by_model["m"]
    assert report.accepted == 1 and report.attempts == 3 and report.retry_attempts == 2
    assert report.retries_by_cause["duplicate"] == 1
    assert report.retries_by_cause["invalid_response"] == 1
    assert report.invalid_response_subcauses["rejected_on_reparse"] == 1
    assert report.given_up["invalid_response"] == 1
    assert report.requests == 2  # no plan: the requests the ledger has seen


def test_random_ledgers_match_a_plain_count(tmp_path: Path) -> None:
    rng = random.Random(3)
    outcomes = ["rate_limit", "provider_error", "timeout", "connection_error", "refusal"]
    expected_causes: Counter[str] = Counter()
    expected_given_up: Counter[str] = Counter()
    retried, latencies, attempts_n = set(), [], 0
    prices = {"m0": Prices(1.0, 2.0)}
    with Ledger.open(tmp_path) as ledger:
        for r in range(300):
            model = f"m{r % 3}"
            rid = f"r{r}"
            tries = rng.randint(1, 4)
            answered = rng.random() < 0.8
            for n in range(1, tries + 1):
                attempts_n += 1
                last = n == tries
                if last and answered:
                    ms = rng.uniform(1, 1000)
                    latencies.append(ms)
                    ledger.record_result(
                        _attempt(rid, n, model, "ok", elapsed=ms), _response(rid, n, model)
                    )
                else:
                    outcome = rng.choice(outcomes)
                    expected_causes[outcome] += 1
                    retried.add(rid)
                    if last:
                        expected_given_up[outcome] += 1
                    ledger.record_result(_attempt(rid, n, model, outcome), None)
            if r % 50 == 0:
                ledger.compact()
    report = audit(tmp_path, prices=prices)
    total = report.totals
    assert total.attempts == attempts_n
    assert total.retry_attempts == sum(expected_causes.values())
    assert {k: v for k, v in total.retries_by_cause.items() if v} == dict(expected_causes)
    assert {k: v for k, v in total.given_up.items() if v} == dict(expected_given_up)
    assert total.requests_retried == len(retried)
    for name, q in (("p50", 50), ("p95", 95), ("p99", 99)):
        assert total.latency_ms[name] == pytest.approx(np.percentile(latencies, q), abs=1e-3)
    m0 = report.by_model["m0"]
    assert m0.cost_usd == pytest.approx((m0.tokens_in * 1.0 + m0.tokens_out * 2.0) / 1e6)
    assert report.by_model["m1"].cost_usd is None
    assert total.cost_usd == pytest.approx(m0.cost_usd)
    assert sum(r.retry_attempts for r in report.by_model.values()) == total.retry_attempts
    table = report.table()
    assert table.filter(pl.col("scope") == "all")["retry_attempts"].item() == total.retry_attempts


def test_sentence_form() -> None:
    assert retry_sentence(1, 1, 10, {"rate_limit": 1}) == (
        "1 retry attempt across 1 request out of 10, attributed to rate limits (1)."
    )
    assert retry_sentence(4744, 4114, 345_500, {
        "rate_limit": 2459, "provider_error": 2268, "interrupted": 7, "connection_error": 5,
        "timeout": 4, "missing_routing_metadata": 1, "refusal": 0,
    }) == (
        "4,744 retry attempts across 4,114 requests out of 345,500, attributed to rate limits "
        "(2,459), provider errors (2,268), interrupted dispatches (7), connection errors (5), "
        "timeouts (4), and missing routing metadata (1)."
    )
    assert retry_sentence(3, 2, 5, {"timeout": 2, "refusal": 1}).endswith(
        "timeouts (2) and refusals (1)."
    )
    assert retry_sentence(0, 0, 7, {}).startswith("No retry attempts")


def test_timeline_counts_every_attempt_once(tmp_path: Path) -> None:
    with Ledger.open(tmp_path) as ledger:
        _scenario(ledger)
    frame = attempt_timeline(tmp_path, bins=4)
    assert frame["attempts"].sum() == 14
    assert set(frame["bin"]) <= {0, 1, 2, 3} and frame["bin"].max() == 3
    by_outcome = dict(frame.group_by("outcome").agg(pl.col("attempts").sum()).iter_rows())
    assert by_outcome["accepted"] == 4 and by_outcome["rate_limit"] == 2
    assert by_outcome["duplicate"] == 1
    assert (frame["end"] > frame["start"]).all()
    first = frame.filter(pl.col("bin") == 0)["start"].min()
    assert first == T0 + timedelta(seconds=10)
    assert attempt_timeline(tmp_path, bins=1)["bin"].max() == 0


def test_empty_and_missing_folders(tmp_path: Path) -> None:
    assert attempt_timeline(tmp_path).is_empty()
    empty = audit(tmp_path)
    assert empty.totals.attempts == 0 and empty.by_model == {}
    with pytest.raises(FileNotFoundError):
        audit(tmp_path / "nope")
