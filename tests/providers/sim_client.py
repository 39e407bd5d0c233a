"""What the three wire-format suites against the simulator share: the prompt they send and
how long their client waits (`test_openai_compat_sim`, `test_bedrock_sim`, `test_vertex_sim`)."""

from __future__ import annotations

from providers.types import ChatRequest

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
