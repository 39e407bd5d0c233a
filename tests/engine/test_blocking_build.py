"""Adapters whose `build` blocks (a Vertex token refresh, an AWS credential-chain lookup) must
not stall the other lanes, and a failed credential refresh is retried or stops only its lane.

The slow adapter below blocks with `time.sleep` inside `build`, as google-auth's synchronous
refresh does: on the event loop it would freeze every lane for its whole duration.
"""

from __future__ import annotations

import io
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from engine.dispatch import dispatch
from engine.lanes import LaneState, builds_may_block
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from providers.base import Adapter
from providers.google_auth_tokens import TokenRefreshError
from providers.registry import adapter_for
from providers.sim.credentials import DEFAULT_CREDENTIALS, SimCredentials
from providers.sim.rehearse import rehearse_model
from providers.sim.server import SimHandle
from providers.types import ChatRequest, HttpRequest, ModelConfig

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

FAST = RetryPolicy(max_attempts=6, base_s=0.01, cap_s=0.05, max_retry_after_s=0.05)
#: Replies the other lane must parse while one build blocks.
DURING = 10
#: How long the build blocks at most waiting for them: on the event loop it would wait all
#: of it (every lane frozen, nothing parsed).
BLOCK_AT_MOST_S = 30.0


class CountingParses:
    """A real adapter that notes when it parses each reply, and says when `DURING` replies
    came after `start` was set."""

    may_block = False

    def __init__(self, inner: Adapter) -> None:
        self.inner, self.provider, self.secrets = inner, inner.provider, inner.secrets
        self.times: list[float] = []
        self.start: float | None = None
        self.enough = threading.Event()

    def build(self, req: ChatRequest) -> HttpRequest:
        return self.inner.build(req)

    def parse(self, status, headers, body):  # type: ignore[no-untyped-def]
        self.times.append(time.monotonic())
        start = self.start
        if start is not None and sum(t > start for t in self.times) >= DURING:
            self.enough.set()
        return self.inner.parse(status, headers, body)


class BlockingBuild:
    """A real adapter whose first `build` blocks its thread (a token refresh) until the
    other lane has parsed `DURING` replies, or `BLOCK_AT_MOST_S`: an event waited for, not a
    fixed sleep, so a loaded machine's slow lane cannot fail the test."""

    may_block = True

    def __init__(self, inner: Adapter, other: CountingParses) -> None:
        self.inner, self.provider, self.secrets = inner, inner.provider, inner.secrets
        self.other = other
        self.window: tuple[float, float] | None = None
        self._lock = threading.Lock()

    def build(self, req: ChatRequest) -> HttpRequest:
        with self._lock:  # like TokenCache: concurrent builders wait for the one refresh
            if self.window is None:
                start = time.monotonic()
                self.other.start = start
                self.other.enough.wait(BLOCK_AT_MOST_S)
                self.window = (start, time.monotonic())
        return self.inner.build(req)

    def parse(self, status, headers, body):  # type: ignore[no-untyped-def]
        return self.inner.parse(status, headers, body)


class FlakyRefresh:
    """Build fails with a `TokenRefreshError` the first `failures` times, then works."""

    may_block = True

    def __init__(self, inner: Adapter, failures: int, *, retryable: bool) -> None:
        self.inner, self.provider, self.secrets = inner, inner.provider, inner.secrets
        self.failures, self.retryable, self.calls = failures, retryable, 0
        self._lock = threading.Lock()

    def build(self, req: ChatRequest) -> HttpRequest:
        with self._lock:
            self.calls += 1
            if self.calls <= self.failures:
                try:
                    raise RuntimeError("token endpoint said: private_key=SECRET-PEM-BODY")
                except RuntimeError:
                    raise TokenRefreshError(
                        "Application Default Credentials (gcloud auth application-default "
                        "login): refused by the token endpoint (invalid_grant)",
                        retryable=self.retryable,
                    ) from None
        return self.inner.build(req)

    def parse(self, status, headers, body):  # type: ignore[no-untyped-def]
        return self.inner.parse(status, headers, body)


def test_only_adapters_that_say_so_are_built_on_threads(kit: type[Kit]) -> None:
    _config, adapter = kit.sim_model("m", "http://127.0.0.1:9")
    assert not builds_may_block(adapter)
    assert builds_may_block(BlockingBuild(adapter, CountingParses(adapter)))
    vertex = ModelConfig(name="v", provider="vertex", model="gemini-2.5-flash")
    bedrock = ModelConfig(name="b", provider="bedrock", model="anthropic.claude-3-haiku")
    env = {
        "GOOGLE_CLOUD_PROJECT": "p",
        "GOOGLE_CLOUD_LOCATION": "us-central1",
        "VERTEX_TOKEN": "t" * 20,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIA0000000000000000",
        "AWS_SECRET_ACCESS_KEY": "s" * 40,
    }
    assert builds_may_block(adapter_for(replace(vertex, api_key_env="VERTEX_TOKEN"), env))
    assert builds_may_block(adapter_for(bedrock, env))


async def test_a_blocking_build_does_not_stall_another_lane(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    plan = kit.write_plan(
        tmp_path / "plan.parquet", kit.plan_rows("slow", 4) + kit.plan_rows("fast", 60)
    )
    slow_config, slow_inner = kit.sim_model("slow", sim.root_url, concurrency=2)
    fast_config, fast_inner = kit.sim_model("fast", sim.root_url, rpm=2400, concurrency=4)
    fast = CountingParses(fast_inner)
    slow = BlockingBuild(slow_inner, fast)
    summary = await dispatch(
        plan,
        tmp_path / "run",
        {"slow": slow_config, "fast": fast_config},
        {"slow": slow, "fast": fast},
        policy=FAST,
        log_console=None,
    )
    assert summary.complete, summary.lines()
    assert slow.window is not None
    start, end = slow.window
    during = [t for t in fast.times if start < t < end]
    # on the loop this would be zero: every lane frozen until the build gave up waiting
    assert len(during) >= DURING, (len(during), end - start, len(fast.times))
    accepted = scan_responses(tmp_path / "run").collect()
    assert accepted.filter(pl.col("model") == "fast").height == 60


async def test_retryable_refresh_failure_is_retried_without_an_attempt(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("v", 5))
    config, inner = kit.sim_model("v", sim.root_url, concurrency=1)
    adapter = FlakyRefresh(inner, failures=2, retryable=True)
    console = io.StringIO()
    summary = await dispatch(
        plan, tmp_path / "run", {"v": config}, {"v": adapter}, policy=FAST, log_console=console
    )
    lane = summary.lanes["v"]
    assert summary.complete and lane.state is LaneState.DONE, summary.lines()
    # nothing was sent on a failed refresh: no attempt, no retry attempt, counted apart
    assert lane.retries.unsent == 2 and lane.retries.total == 0
    attempts = scan_attempts(tmp_path / "run").collect()
    assert attempts.height == 5 and set(attempts["outcome"]) == {"ok"}  # nothing was sent twice
    log = (tmp_path / "run" / "logs" / "engine.jsonl").read_text()
    assert "build_failed_retrying" in log and "SECRET-PEM-BODY" not in log + console.getvalue()


async def test_permanent_refresh_failure_stops_only_its_lane(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    plan = kit.write_plan(
        tmp_path / "plan.parquet", kit.plan_rows("v", 5) + kit.plan_rows("ok", 10)
    )
    config, inner = kit.sim_model("v", sim.root_url, concurrency=1)
    ok_config, ok = kit.sim_model("ok", sim.root_url)
    adapter = FlakyRefresh(inner, failures=100, retryable=False)
    console = io.StringIO()
    summary = await dispatch(
        plan,
        tmp_path / "run",
        {"v": config, "ok": ok_config},
        {"v": adapter, "ok": ok},
        policy=FAST,
        log_console=console,
    )
    lane = summary.lanes["v"]
    assert lane.state is LaneState.STOPPED and adapter.calls == 1
    assert "refused by the token endpoint" in lane.message and "v (openai)" in lane.message
    assert summary.lanes["ok"].accepted == 10
    text = console.getvalue() + (tmp_path / "run" / "logs" / "engine.jsonl").read_text()
    assert "SECRET-PEM-BODY" not in text


async def test_vertex_with_a_key_the_token_endpoint_refuses_stops_its_lane(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """The real path: google-auth's JWT grant refused by the simulator's token endpoint."""
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = stranger.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    wrong = replace(DEFAULT_CREDENTIALS, sa_private_key_pem=pem)
    assert isinstance(wrong, SimCredentials)
    config = ModelConfig(name="gem", provider="vertex", model="gemini-2.5-flash", max_tokens=256)
    rehearsed, env = rehearse_model(config, sim.root_url, tmp_path / "creds", wrong)
    adapter = adapter_for(rehearsed, env)
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("gem", 4))
    console = io.StringIO()
    summary = await dispatch(
        plan,
        tmp_path / "run",
        {"gem": rehearsed},
        {"gem": adapter},
        policy=FAST,
        log_console=console,
    )
    lane = summary.lanes["gem"]
    assert lane.state is LaneState.STOPPED, summary.lines()
    assert "credential refresh failed" in lane.message
    assert sim.counts().get("oauth.rejected", 0) >= 1
    body = "".join(pem.splitlines()[1:-1])
    text = console.getvalue() + (tmp_path / "run" / "logs" / "engine.jsonl").read_text()
    assert body[:40] not in text and body[-40:] not in text
