"""Fixtures for provider tests: a capture server on 127.0.0.1 and canned reply builders.

The capture server is how official clients become oracles: `openai.AsyncOpenAI` sends its
request there, we record method, path, query, headers and body, and compare with what our
adapters build for the same arguments. It answers with a valid chat completion so the client
call finishes normally.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from aiohttp import web


@dataclass
class Captured:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class CaptureServer:
    root_url: str
    requests: list[Captured] = field(default_factory=list)


def chat_completion(
    content: str | None = '{"probability": 0.4}',
    *,
    finish_reason: str | None = "stop",
    model: str | None = "test-model",
    id: str | None = "chatcmpl-123",
    usage: dict[str, Any] | None = None,
    refusal: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A chat-completion reply; pass None to leave a field out."""
    body: dict[str, Any] = {"object": "chat.completion", "created": 1700000000}
    if id is not None:
        body["id"] = id
    if model is not None:
        body["model"] = model
    body["choices"] = [
        {
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": refusal},
            "finish_reason": finish_reason,
        }
    ]
    body["usage"] = usage or {"prompt_tokens": 15, "completion_tokens": 16, "total_tokens": 31}
    body.update(extra)
    return body


@pytest.fixture
def completion() -> Callable[..., dict[str, Any]]:
    """The `chat_completion` builder, as a fixture (test modules cannot import conftest)."""
    return chat_completion


@pytest.fixture
async def capture_server() -> AsyncIterator[CaptureServer]:
    """An aiohttp server on 127.0.0.1 recording every request and answering a completion."""
    server = CaptureServer(root_url="")

    async def handle(request: web.Request) -> web.Response:
        server.requests.append(
            Captured(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=dict(request.headers),
                body=await request.read(),
            )
        )
        return web.json_response(chat_completion())

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.root_url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()
