"""Retries that can succeed, through the whole dispatch against the fake llama server: answer
failures have their own budget, each retry changes the request, a reply repeated at
temperature 0 stops at once, and the ledger says what was done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from llamafake import FakeLlama

from engine.dispatch import dispatch
from engine.lanes import LaneState
from engine.ledger import scan_attempts
from engine.retry import AnswerRetry, RetryPolicy
from providers.registry import adapter_for
from providers.types import ModelConfig, Outcome

FAST = RetryPolicy(max_attempts=6, base_s=0.01, cap_s=0.02, max_answer_failures=5)
SYSTEM = "You are a careful forecaster."


def plan(path: Path, n: int = 2, keys: tuple[str, ...] = ("Q01", "Q02")) -> Path:
    rows = [
        {
            "request_id": f"r{i}", "model": "gemma", "arm": "test", "unit": f"u{i}",
            "events": [f"e{i}{k}" for k in keys], "keys": list(keys), "pass": 0, "seed": 7,
            "system": SYSTEM, "user": f"Question {i}: " + ", ".join(keys) + "?",
        }
        for i in range(n)
    ]
    pl.DataFrame(rows).with_columns(pl.col("pass", "seed").cast(pl.Int64)).write_parquet(path)
    return path


async def run(
    tmp_path: Path, base_url: str, policy: RetryPolicy = FAST, n: int = 2, **kw: Any
) -> Any:
    config = ModelConfig(name="gemma", provider="openai", model="gemma-3-270m",
                         base_url=base_url, temperature=0.0, max_tokens=16, seed=7,
                         concurrency=1, **kw)
    summary = await dispatch(
        plan(tmp_path / "plan.parquet", n), tmp_path / "run", {"gemma": config},
        {"gemma": adapter_for(config, {})}, policy=policy, log_console=None,
    )
    attempts = scan_attempts(tmp_path / "run").collect().sort("request_id", "attempt")
    return summary, attempts


async def test_an_echo_to_the_cap_gets_a_higher_cap_once_then_stops_on_the_repeat(
    tmp_path: Path, llama: FakeLlama
) -> None:
    summary, attempts = await run(tmp_path, llama.root_url + "/v1")
    one = attempts.filter(pl.col("request_id") == "r0")
    # 1: cap 16, truncated; 2: cap 32, a longer echo; 3: new seed, same echo at temperature 0
    assert one["outcome"].to_list() == ["truncated"] * 3
    assert one["finish_reason"].to_list() == ["length"] * 3  # as the server sent it
    details = one["detail"].to_list()
    assert "retry with" not in details[0]
    assert "[retry with max_tokens 32]" in details[1]
    assert "[retry with seed 9, max_tokens 32]" in details[2]
    stop = "gave up: same reply as attempt 2 at temperature 0: not asked again this run"
    assert stop in details[2]
    sent = [r for r in llama.requests if "Question 0" in str(r["messages"])]
    assert [(r["max_tokens"], r["seed"]) for r in sent] == [(16, 7), (32, 7), (32, 9)]
    lane = summary.lanes["gemma"]
    assert summary.accepted == 0 and lane.gave_up == 2 and lane.retries.exhausted == 0


async def test_a_schema_that_lets_bad_values_through_is_asked_twice_not_eight_times(
    tmp_path: Path, llama: FakeLlama
) -> None:
    _, attempts = await run(tmp_path, llama.root_url + "/v1", response_format="json_object_schema")
    one = attempts.filter(pl.col("request_id") == "r0")
    assert one["outcome"].to_list() == ["invalid_response"] * 2
    assert one["detail"][0].startswith("out_of_range")
    assert "[retry with seed 8]" in one["detail"][1]
    assert "gave up: same reply as attempt 1" in one["detail"][1]


async def test_grammar_and_folding_get_every_answer_accepted_first_time(
    tmp_path: Path, llama: FakeLlama
) -> None:
    summary, attempts = await run(
        tmp_path, llama.root_url + "/v1", response_format="grammar", fold_system=True
    )
    assert summary.complete and summary.accepted == 2
    assert attempts["outcome"].to_list() == ["ok", "ok"]
    assert all(d == "[system folded into user turn]" for d in attempts["detail"])
    assert all(SYSTEM in seen for seen in llama.seen)


async def test_a_lane_whose_server_is_not_running_stops_at_once_with_the_hint(
    tmp_path: Path
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    summary, attempts = await run(tmp_path, f"http://127.0.0.1:{port}/v1")
    lane = summary.lanes["gemma"]
    assert lane.state is LaneState.STOPPED
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in lane.message
    assert "is the server running" in lane.message
    assert attempts.height == 1  # not every query's attempts


def test_answer_retry_budget_counts_earlier_runs_and_varies_what_it_can() -> None:
    fresh = AnswerRetry(base_seed=7, base_cap=64, temperature=1.0, budget=3)
    assert fresh.failed(Outcome.TRUNCATED, "abc", 1) is None
    assert (fresh.seed, fresh.cap) == (7, 128)  # the cap is raised once...
    assert fresh.failed(Outcome.TRUNCATED, "abcd", 2) is None
    assert (fresh.seed, fresh.cap) == (9, 128)  # ...then the seed moves on
    assert fresh.failed(Outcome.INVALID_RESPONSE, "abcd", 3) == (
        "3 answer failures (budget 3, across runs)"
    )  # the same reply at temperature 1 is not a reason, the budget is
    resumed = AnswerRetry(base_seed=7, base_cap=64, temperature=0.0, budget=3, failures=2)
    assert resumed.seed == 9 and not resumed.spent
    assert resumed.failed(Outcome.INVALID_RESPONSE, "x", 3) is not None
    assert AnswerRetry(None, None, 0.0, budget=3, failures=3).spent


@pytest.mark.parametrize("budget", [0, -1])
def test_a_policy_needs_an_answer_budget(budget: int) -> None:
    with pytest.raises(ValueError, match="max_answer_failures"):
        RetryPolicy(max_answer_failures=budget)


async def test_a_form_the_server_rejects_stops_the_lane_with_its_words(
    tmp_path: Path, llama: FakeLlama
) -> None:
    summary, attempts = await run(
        tmp_path, llama.root_url + "/v1", n=6, response_format="json_schema"
    )
    lane = summary.lanes["gemma"]
    assert lane.state is LaneState.STOPPED
    assert "Input should be 'text' or 'json_object'" in lane.message
    assert attempts.height == 3  # three in a row stop the lane: not 6 queries x 6 attempts
    assert set(attempts["outcome"]) == {"bad_request"}
