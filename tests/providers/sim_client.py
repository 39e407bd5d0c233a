"""What the three wire-format suites against the simulator share: the prompt they send and
how long their client waits, and how an injected fault must be classified
(`test_openai_compat_sim`, `test_bedrock_sim`, `test_vertex_sim`)."""

from __future__ import annotations

import pytest

from providers.sim.faults import INTENDED_OUTCOME, FaultKind, FaultProfile
from providers.types import ChatRequest, Completion, Failure, Outcome

PROMPT = ChatRequest(
    "r1",
    "You are a careful forecaster. Reply with a JSON object only.",
    'What is the probability that the S&P 500 closes up tomorrow? Reply as {"probability": p}.',
    seed=7,
)
#: A clean reply takes milliseconds; the client waits seconds, so a loaded machine never
#: turns one into a timeout (0.3 s was too tight for that, once, under load).
CLIENT_TIMEOUT_S = 2.0
#: A slow fault's reply comes after the client gave up, whatever the load (load only
#: delays it further).
SLOW_DELAY_S = CLIENT_TIMEOUT_S + 0.5
#: A test that knows every reply is a slow fault need not wait the whole timeout.
SLOW_FAULT_TIMEOUT_S = 0.3
RETRY_AFTER_S = 0.25


def give_up(kind: FaultKind) -> float:
    """The client's timeout when every reply is `kind`."""
    return SLOW_FAULT_TIMEOUT_S if kind is FaultKind.SLOW else CLIENT_TIMEOUT_S


def only(kind: FaultKind) -> FaultProfile:
    """A fault profile whose every reply is `kind` (a slow one after the client gave up)."""
    return FaultProfile(kind.value, {kind: 1.0}, slow_delay_s=SLOW_DELAY_S)


def intended(kind: FaultKind) -> tuple[Outcome, float | None]:
    """(outcome, retry_after_s) an injected fault must be classified as, where the provider's
    wire carries every fault as the simulator means it (Bedrock, Vertex)."""
    return INTENDED_OUTCOME[kind], (RETRY_AFTER_S if kind is FaultKind.RATE_LIMIT else None)


def assert_classified(
    result: Completion | Failure, kind: FaultKind, outcome: Outcome, retry_after: float | None
) -> None:
    """`result` is the failure `kind` must become, with what that failure must keep."""
    assert isinstance(result, Failure), result
    assert result.outcome is outcome, result
    if kind in (FaultKind.RATE_LIMIT, FaultKind.RATE_LIMIT_BARE):
        assert result.retry_after_s == (pytest.approx(retry_after) if retry_after else None)
        assert not result.quota_exhausted
    if kind is FaultKind.OUTPUT_CAP:
        assert result.raw_text and result.tokens_out
    if kind is FaultKind.MISSING_ROUTING:
        assert result.raw_text  # the unroutable answer is still kept for the audit
