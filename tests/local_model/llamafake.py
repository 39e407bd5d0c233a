"""A fake llama-cpp-python server (aiohttp) with the behaviours observed of the real one.

Observed of `python -m llama_cpp.server --chat_format gemma` serving Gemma 3 270M (issue 11):

- `response_format: {"type": "json_schema", ...}` is refused with HTTP 500 and pydantic's
  "Input should be 'text' or 'json_object'";
- `{"type": "json_object", "schema": ...}` is honoured for keys but `minimum`/`maximum` are
  ignored: the model writes `{"Q01": 2}`;
- a `grammar` field constrains the output (this fake walks the grammar's own keys and writes
  values the grammar allows, checked with `gbnf_regex`);
- the gemma chat format drops a system message: the model never sees it;
- unconstrained at temperature 0, the model echoes the prompt until the cap (`finish_reason`
  "length"), identically on every ask, whatever the seed.

`FakeLlama.seen` keeps every prompt as the "model" saw it, so tests can tell whether a system
message arrived.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


def gbnf_regex(grammar: str) -> re.Pattern[str]:
    """A regular expression equal to a non-recursive GBNF grammar of the subset this project
    writes (string literals, character classes, `?`, `|`, parentheses, rule references).

    An independent reading of the grammar: tests check `providers.constrained` against it and
    it against hand-written expressions.
    """
    rules: dict[str, str] = {}
    for line in grammar.strip().splitlines():
        name, _, body = line.partition("::=")
        rules[name.strip()] = body.strip()
    token = re.compile(r'\s*("(?:\\.|[^"\\])*"|\[[^\]]*\]|[A-Za-z][\w-]*|[()|?])')

    def translate(name: str, depth: int = 0) -> str:
        if depth > 20:
            raise ValueError("recursive grammar")
        out: list[str] = []
        pos = 0
        body = rules[name]
        while pos < len(body):
            match = token.match(body, pos)
            if match is None:
                if body[pos:].strip():
                    raise ValueError(f"cannot read {body[pos:]!r}")
                break
            pos = match.end()
            item = match.group(1)
            if item.startswith('"'):
                literal = item[1:-1].replace('\\"', '"').replace("\\\\", "\\")
                out.append("(?:" + re.escape(literal) + ")")
            elif item.startswith("["):
                out.append(item)
            elif item in "()|?":
                out.append("(?:" if item == "(" else item)
            else:
                out.append("(?:" + translate(item, depth + 1) + ")")
        return "".join(out)

    return re.compile(translate("root"))


@dataclass
class FakeLlama:
    """State shared with the test: what arrived, and what the model saw."""

    root_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    #: Replies written by a grammar walk: (grammar, text) for the tests to check.
    walked: list[tuple[str, str]] = field(default_factory=list)


def _prompt(messages: list[dict[str, Any]]) -> str:
    """The gemma template as llama-cpp-python renders it: system messages are dropped."""
    turns = [
        f"<start_of_turn>{m['role']}\n{m['content']}<end_of_turn>\n"
        for m in messages
        if m.get("role") in ("user", "assistant")
    ]
    return "".join(turns) + "<start_of_turn>model\n"


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


def _schema_reply(schema: dict[str, Any]) -> str:
    """Keys right, bounds ignored: what Gemma 270M wrote under a schema."""
    keys = list(schema.get("properties", {}))
    return orjson.dumps({key: 2 + i for i, key in enumerate(keys)}).decode()


def _grammar_reply(grammar: str, seed: int) -> str:
    """Values the grammar allows for each key the grammar names, in its order."""
    keys = re.findall(r'"\\"((?:[^"\\]|\\\\.)*)\\""', grammar)
    rng = random.Random(seed)
    values = [f"0.{rng.randrange(10_000):04d}".rstrip("0").rstrip(".") or "0" for _ in keys]
    return "{" + ", ".join(f'"{k}": {v}' for k, v in zip(keys, values, strict=True)) + "}"


def _completion(text: str, finish: str, prompt: str, tokens_out: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "gemma-3-270m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": len(_words(prompt)),
            "completion_tokens": tokens_out,
            "total_tokens": len(_words(prompt)) + tokens_out,
        },
    }


def make_app(state: FakeLlama) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        state.requests.append(body)
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") not in (None, "text", "json_object"):
            detail = [{
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": "Input should be 'text' or 'json_object'",
            }]
            return web.json_response({"detail": detail}, status=500)
        prompt = _prompt(body.get("messages", []))
        state.seen.append(prompt)
        cap = int(body.get("max_tokens") or 16)
        if isinstance(body.get("grammar"), str):
            text = _grammar_reply(body["grammar"], int(body.get("seed") or 0))
            state.walked.append((body["grammar"], text))
            return web.json_response(_completion(text, "stop", prompt, len(_words(text))))
        if isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict):
            text = _schema_reply(fmt["schema"])
            return web.json_response(_completion(text, "stop", prompt, len(_words(text))))
        words = _words(prompt)
        echo = "".join(words[i % len(words)] for i in range(cap))  # greedy: seed changes nothing
        return web.json_response(_completion(echo, "length", prompt, cap))

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "gemma-3-270m"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


async def serve(state: FakeLlama) -> AsyncIterator[FakeLlama]:
    """Run the fake on a free loopback port for the duration of a test."""
    runner = web.AppRunner(make_app(state))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state.root_url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()
