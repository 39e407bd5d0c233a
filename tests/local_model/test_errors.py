"""Errors a user can act on, and what the server said recorded as it said it."""

from __future__ import annotations

import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import orjson
from llamafake import FakeLlama

from engine.http import HttpClient
from providers.base import DETAIL_LIMIT
from providers.registry import adapter_for
from providers.types import ChatRequest, Completion, Failure, ModelConfig, Outcome
from tests.ports import free_port

REQ = ChatRequest("r1", "You forecast.", "P(Q01)?", keys=("Q01",))


def gemma(base_url: str, **kw: object) -> ModelConfig:
    return ModelConfig(name="gemma", provider="openai", model="gemma-3-270m", base_url=base_url,
                       temperature=0.0, max_tokens=16, **kw)  # type: ignore[arg-type]


async def ask(config: ModelConfig, req: ChatRequest = REQ) -> Completion | Failure:
    adapter = adapter_for(config, {})
    async with HttpClient() as http:
        return await http.send(adapter, adapter.build(req), 10.0)


async def test_a_base_url_without_v1_names_the_url_and_the_likely_fix(llama: FakeLlama) -> None:
    result = await ask(gemma(llama.root_url))  # the API root is {root}/v1
    assert isinstance(result, Failure)
    assert result.outcome is Outcome.BAD_REQUEST
    assert result.http_status == 404
    assert f"POST {llama.root_url}/chat/completions" in result.detail
    assert "does base_url end in /v1?" in result.detail


async def test_a_static_web_server_at_base_url_is_a_bad_request_naming_the_url() -> None:
    """A wrong port answered by `python -m http.server`: its 501 ("Unsupported method") was a
    provider error, so the lane probed a server that can never answer for five minutes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        result = await ask(gemma(url))
    finally:
        server.shutdown()
        server.server_close()
    assert isinstance(result, Failure)
    assert (result.outcome, result.http_status) == (Outcome.BAD_REQUEST, 501)
    assert not result.retryable
    # The page's words, not its markup, and the URL and the hint after them, uncut.
    assert "Message: Unsupported method ('POST')." in result.detail
    assert "<" not in result.detail
    assert result.detail.endswith(
        f"(POST {url}/chat/completions; that server does not implement this request: is "
        "base_url the model's server?)"
    )


async def test_the_url_and_hint_survive_a_long_error_page(llama: FakeLlama) -> None:
    """A 404 page longer than a detail cut the URL and the hint off its end."""
    adapter = adapter_for(gemma(llama.root_url), {})
    page = b"<html><body><p>" + b"Not found. " * 100 + b"</p></body></html>"
    result = adapter.parse(404, {}, page)
    assert isinstance(result, Failure) and len(result.detail) <= DETAIL_LIMIT
    assert result.detail.startswith("HTTP 404: Not found. Not found.")
    assert result.detail.endswith(
        f"(POST {llama.root_url}/chat/completions; does base_url end in /v1?)"
    )


async def test_a_server_not_running_is_unreachable_with_the_url_and_a_hint() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = await ask(gemma(url))
    assert isinstance(result, Failure)
    assert result.outcome is Outcome.CONNECTION_ERROR
    assert result.unreachable
    assert f"{url}/chat/completions" in result.detail
    assert "is the server running" in result.detail


async def test_truncated_reply_keeps_the_servers_finish_reason(llama: FakeLlama) -> None:
    result = await ask(gemma(llama.root_url + "/v1"))
    assert isinstance(result, Failure)
    assert result.outcome is Outcome.TRUNCATED
    assert result.finish_reason == "length"
    assert result.raw_text and result.raw_text.startswith("<start_of_turn>user")


async def test_gemma_format_drops_a_system_message_unless_folded(llama: FakeLlama) -> None:
    await ask(gemma(llama.root_url + "/v1", response_format="grammar"))
    assert "You forecast." not in llama.seen[-1]
    await ask(gemma(llama.root_url + "/v1", response_format="grammar", fold_system=True))
    assert "You forecast." in llama.seen[-1]


async def test_a_body_the_server_cannot_validate_is_a_bad_request_even_as_a_500(
    llama: FakeLlama
) -> None:
    # llama-cpp-python answers OpenAI's json_schema form with HTTP 500 and pydantic's words:
    # re-sending it cannot help, so it counts as the permanent failure it is.
    result = await ask(gemma(llama.root_url + "/v1", response_format="json_schema"))
    assert isinstance(result, Failure)
    assert result.http_status == 500
    assert result.outcome is Outcome.BAD_REQUEST
    assert result.detail == (
        "HTTP 500: the server rejected the request: "
        "body.response_format.type: Input should be 'text' or 'json_object'"
    )


async def test_a_plain_500_is_still_a_provider_error_worth_retrying() -> None:
    from providers.openai_compat import ClientDialect, parse_reply

    dialect = ClientDialect(provider="openai")
    plain = parse_reply(500, {}, b'{"error": {"message": "Internal error"}}', dialect)
    deepinfra = parse_reply(500, {}, b'{"detail": {"error": "overloaded"}}', dialect)
    assert isinstance(plain, Failure) and plain.outcome is Outcome.PROVIDER_ERROR
    assert isinstance(deepinfra, Failure) and deepinfra.outcome is Outcome.PROVIDER_ERROR


async def test_json_object_schema_gets_the_keys_but_not_the_bounds(llama: FakeLlama) -> None:
    result = await ask(gemma(llama.root_url + "/v1", response_format="json_object_schema"))
    assert isinstance(result, Completion)
    assert orjson.loads(result.text) == {"Q01": 2}
    assert llama.requests[-1]["response_format"]["schema"]["required"] == ["Q01"]


async def test_grammar_replies_are_one_bounded_object(llama: FakeLlama) -> None:
    from llamafake import gbnf_regex

    req = ChatRequest("r2", "s", "u", seed=3, keys=("Q01", "Q02"))
    result = await ask(gemma(llama.root_url + "/v1", response_format="grammar"), req)
    assert isinstance(result, Completion)
    grammar, text = llama.walked[-1]
    assert text == result.text
    assert gbnf_regex(grammar).fullmatch(text)
