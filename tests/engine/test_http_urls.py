"""The engine sends `HttpRequest.url` byte for byte.

Bedrock model ids carry `:` (`anthropic.claude-3-haiku-20240307-v1:0`), which the adapter
percent-encodes as `%3A` and signs in that form. If the engine let yarl re-normalise the URL,
the path the server sees would no longer be the signed one and every request would fail
with `InvalidSignatureException` (the simulator checks SigV4 as AWS does).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from engine.dispatch import dispatch
from engine.http import HttpClient
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from providers.registry import adapter_for
from providers.sim.rehearse import rehearse_model
from providers.sim.server import start_sim
from providers.types import ChatRequest, HttpRequest, ModelConfig

if TYPE_CHECKING:
    from tests.engine.conftest import Kit, ServeAny

HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
FAST = RetryPolicy(max_attempts=2, base_s=0.01, cap_s=0.02, max_retry_after_s=0.02)


async def test_bedrock_model_with_colon_is_accepted_through_the_engine(
    tmp_path: Path, kit: type[Kit]
) -> None:
    config = ModelConfig(name="haiku", provider="bedrock", model=HAIKU, max_tokens=256)
    async with await start_sim() as sim:
        rehearsed, env = rehearse_model(config, sim.root_url, tmp_path / "creds")
        adapter = adapter_for(rehearsed, env)
        assert "%3A" in adapter.build(_chat()).url  # the premise: the signed path is encoded
        plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows("haiku", 6))
        summary = await dispatch(
            plan,
            tmp_path / "run",
            {"haiku": rehearsed},
            {"haiku": adapter},
            policy=FAST,
            log_console=None,
        )
        counts = sim.counts()
    attempts = scan_attempts(tmp_path / "run").collect()
    assert summary.complete, (summary.lines(), attempts["detail"].to_list())
    assert set(attempts["outcome"]) == {"ok"} and attempts.height == 6
    assert counts.get("auth_rejected", 0) == 0
    assert scan_responses(tmp_path / "run").collect().height == 6


async def test_fetch_sends_the_path_verbatim(serve_any: ServeAny) -> None:
    """Escaped reserved characters reach the server escaped, exactly as built."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.Response(text="{}")

    root = await serve_any(record)
    path = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse?x=a%2Fb"
    async with HttpClient() as http:
        raw = await http.fetch(HttpRequest("POST", f"{root}{path}", {}, b""), 5.0)
    assert isinstance(raw, tuple) and raw[0] == 200
    assert seen == [path]


def _chat() -> ChatRequest:
    return ChatRequest("r1", "system", 'Reply as {"probability": p}.')


def test_parsed_urls_are_reused_and_the_cache_bounded() -> None:
    from engine import http

    client = HttpClient()
    url = "http://127.0.0.1:9/bedrock/model/a%3Ab/converse"
    parsed = client._url(url)
    assert client._url(url) is parsed
    assert str(parsed) == url  # still verbatim, `%3A` kept
    for i in range(http._URL_CACHE + 5):
        client._url(f"http://127.0.0.1:9/v{i}")
    assert len(client._urls) <= http._URL_CACHE
