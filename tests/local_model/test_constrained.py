"""Constrained output: the grammar and schemas generated from a query's keys, and the request
bodies that carry them (or record them as left out where a provider cannot take them)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from llamafake import gbnf_regex

from engine.answers import AnswerError, parse_answer
from providers.constrained import (
    RESPONSE_FORMATS,
    answer_grammar,
    answer_schema,
    constraint_fields,
)
from providers.openai_compat import ClientDialect, build_body, request_notes
from providers.registry import adapter_for
from providers.types import ChatRequest, ConfigError, ModelConfig

KEYS = ("Q01", "Q02", "Q03")
#: The answers the grammar must admit, written independently of it: `0`, `0.` + 1-4 digits,
#: `1`, `1.` + 1-4 zeros; optional single spaces around the punctuation.
PROB = r"(?:0(?:\.[0-9]{1,4})?|1(?:\.0{1,4})?)"


def hand_regex(keys: tuple[str, ...]) -> re.Pattern[str]:
    members = r" ?, ?".join(rf'"{re.escape(k)}" ?: ?{PROB}' for k in keys)
    return re.compile(r"\{ ?" + members + r" ?\}")


def test_the_fake_servers_grammar_reader_agrees_with_a_hand_written_expression() -> None:
    # The reader is itself checked, so that tests of the grammar through it mean something.
    assert gbnf_regex('root ::= "a" ("b" | [0-9])? x\nx ::= "c"').pattern
    reader = gbnf_regex('root ::= "a" ("b" | [0-9])? x\nx ::= "c"')
    assert all(reader.fullmatch(s) for s in ("ac", "abc", "a7c"))
    assert not any(reader.fullmatch(s) for s in ("a", "abbc", "axc", "a77c"))


@given(st.text(alphabet="0123456789.-e \"{}:,Q", max_size=40))
def test_grammar_admits_exactly_the_bounded_probabilities(text: str) -> None:
    grammar = gbnf_regex(answer_grammar(KEYS[:1]))
    assert bool(grammar.fullmatch(text)) == bool(hand_regex(KEYS[:1]).fullmatch(text))


@pytest.mark.parametrize(
    ("value", "admitted"),
    [
        ("0", True), ("1", True), ("0.5", True), ("0.1234", True), ("1.0", True),
        ("1.0000", True), ("0.12345", False), ("0.", False), ("1.5", False), ("2", False),
        (".5", False), ("-0.1", False), ("1e-3", False), ("01", False), ("1.00001", False),
    ],
)
def test_grammar_values(value: str, admitted: bool) -> None:
    grammar = gbnf_regex(answer_grammar(KEYS))
    text = '{"Q01": ' + value + ', "Q02": 0.25, "Q03": 1}'
    assert bool(grammar.fullmatch(text)) is admitted


@given(st.lists(st.sampled_from(["0", "1", "0.5", "0.0001", "1.0", "0.9999"]), min_size=3,
                max_size=3))
def test_every_reply_the_grammar_admits_passes_the_strict_parser(values: list[str]) -> None:
    text = "{" + ", ".join(f'"{k}": {v}' for k, v in zip(KEYS, values, strict=True)) + "}"
    assert gbnf_regex(answer_grammar(KEYS)).fullmatch(text)
    parsed = parse_answer(text, list(KEYS), "strict")
    assert parsed == {k: float(v) for k, v in zip(KEYS, values, strict=True)}


def test_grammar_quotes_keys_with_json_and_gbnf_escapes() -> None:
    keys = ('say "hi"', "back\\slash")
    grammar = gbnf_regex(answer_grammar(keys))
    text = "{" + ", ".join(f"{orjson.dumps(k).decode()}: 0.5" for k in keys) + "}"
    assert grammar.fullmatch(text)
    assert parse_answer(text, list(keys), "strict") == dict.fromkeys(keys, 0.5)


def test_grammar_refuses_missing_and_extra_keys() -> None:
    grammar = gbnf_regex(answer_grammar(KEYS[:2]))
    assert not grammar.fullmatch('{"Q01": 0.5}')
    assert not grammar.fullmatch('{"Q01": 0.5, "Q02": 0.5, "Q03": 0.5}')
    with pytest.raises(ValueError):
        answer_grammar(())


def test_schema_has_exactly_the_keys_in_the_unit_interval() -> None:
    schema = answer_schema(KEYS)
    assert schema["required"] == list(KEYS)
    assert set(schema["properties"]) == set(KEYS)
    assert schema["additionalProperties"] is False
    assert all(p == {"type": "number", "minimum": 0, "maximum": 1}
               for p in schema["properties"].values())


def test_each_form_is_the_body_field_its_server_takes() -> None:
    openai = constraint_fields("json_schema", KEYS)["response_format"]
    assert openai["type"] == "json_schema"
    assert openai["json_schema"]["strict"] is True
    assert openai["json_schema"]["schema"] == answer_schema(KEYS)
    llama = constraint_fields("json_object_schema", KEYS)["response_format"]
    assert llama == {"type": "json_object", "schema": answer_schema(KEYS)}
    assert constraint_fields("grammar", KEYS) == {"grammar": answer_grammar(KEYS)}
    with pytest.raises(ValueError, match="json_schema"):
        constraint_fields("xml", KEYS)


def cfg(**kw: Any) -> ModelConfig:
    base: dict[str, Any] = {"name": "gemma", "provider": "openai", "model": "gemma-3-270m"}
    base.update(kw)
    return ModelConfig(**base)


REQ = ChatRequest("r1", "You forecast.", "P(Q01), P(Q02)?", seed=5, keys=("Q01", "Q02"))
ANY = ClientDialect(provider="openai", token_field="max_tokens",
              response_formats=frozenset(RESPONSE_FORMATS))
HOSTED = ClientDialect(provider="groq")


@pytest.mark.parametrize("kind", RESPONSE_FORMATS)
def test_body_carries_the_constraint_built_from_the_requests_keys(kind: str) -> None:
    body, omitted = build_body(cfg(response_format=kind), REQ, ANY)
    assert omitted == ()
    for name, value in constraint_fields(kind, REQ.keys).items():
        assert body[name] == value


def test_a_form_the_provider_cannot_take_is_left_out_and_named() -> None:
    body, omitted = build_body(cfg(provider="groq", response_format="grammar"), REQ, HOSTED)
    assert "grammar" not in body
    assert omitted == ("grammar",)
    body, omitted = build_body(cfg(provider="groq", response_format="json_schema"), REQ, HOSTED)
    assert body["response_format"]["type"] == "json_schema"
    assert omitted == ()


def test_fold_system_moves_the_system_message_into_the_user_turn_and_says_so() -> None:
    config = cfg(fold_system=True)
    body, _ = build_body(config, REQ, ANY)
    assert body["messages"] == [
        {"role": "user", "content": "You forecast.\n\nP(Q01), P(Q02)?"}
    ]
    assert request_notes(config, REQ) == ("system folded into user turn",)
    plain, _ = build_body(cfg(), REQ, ANY)
    assert [m["role"] for m in plain["messages"]] == ["system", "user"]
    assert request_notes(cfg(), REQ) == ()


def test_a_requests_own_cap_wins_over_the_models() -> None:
    body, _ = build_body(cfg(max_tokens=64), REQ, ANY)
    assert body["max_tokens"] == 64
    raised = ChatRequest("r1", "s", "u", keys=("Q01",), max_tokens=128)
    body, _ = build_body(cfg(max_tokens=64), raised, ANY)
    assert body["max_tokens"] == 128


def test_openai_adapter_takes_every_form_and_the_base_url_from_the_named_variable() -> None:
    config = cfg(response_format="grammar", base_url="http://127.0.0.1:9/v1",
                 extra={"base_url_env": "LOCAL_URL"})
    adapter = adapter_for(config, {"LOCAL_URL": "http://127.0.0.1:4321/v1"})
    request = adapter.build(REQ)
    assert request.url == "http://127.0.0.1:4321/v1/chat/completions"
    assert "grammar" in orjson.loads(request.body)
    assert adapter_for(config, {}).build(REQ).url == "http://127.0.0.1:9/v1/chat/completions"


def test_a_base_url_from_the_named_variable_is_checked_like_the_specs_and_never_shown() -> None:
    config = cfg(base_url="http://127.0.0.1:9/v1", extra={"base_url_env": "LOCAL_URL"})
    for bad, problem in (
        ("http://[::1", "a well-formed http:// or https:// URL (Invalid IPv6 URL)"),
        ("http://me:s3cret@h/v1", "a URL without a user or password"),
        ("127.0.0.1:8080", "an http:// or https:// URL"),
    ):
        with pytest.raises(ConfigError) as caught:
            adapter_for(config, {"LOCAL_URL": bad})
        assert f"LOCAL_URL must be {problem}" in str(caught.value)
        assert bad not in str(caught.value) and "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("provider", "model", "extra", "env"),
    [
        ("bedrock", "us.anthropic.claude-sonnet-4-v1:0", {"region": "us-east-1"},
         {"AWS_BEARER_TOKEN_BEDROCK": "k"}),
        ("vertex", "gemini-2.5-flash", {"project": "p", "location": "us-central1",
                                        "api_key_env": "VERTEX_TOKEN"},
         {"VERTEX_TOKEN": "ya29.test"}),
    ],
)
def test_cloud_native_shapes_record_response_format_as_left_out(
    provider: str, model: str, extra: dict[str, str], env: dict[str, str]
) -> None:
    config = ModelConfig(name="m", provider=provider, model=model,
                         response_format="json_schema", **extra)  # type: ignore[arg-type]
    assert "response_format" in adapter_for(config, env).build(REQ).omitted


def test_parser_still_rejects_what_a_schema_let_through() -> None:
    # llama.cpp ignores minimum/maximum: the strict parser is the last line of defence.
    with pytest.raises(AnswerError) as caught:
        parse_answer('{"Q01": 2, "Q02": 3}', ["Q01", "Q02"], "strict")
    assert caught.value.subcause == "out_of_range"
