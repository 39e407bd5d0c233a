"""An OpenAI-shaped adapter builds bodies from per-shape templates (issue 12): every body is
byte for byte what encoding the whole `build_body` dict makes, for any text, seed, cap, keys
and model options, on every OpenAI-shaped provider; the omitted options are the same too."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from providers.openai_compat import OpenAICompatAdapter, build_body, check_values, encode
from providers.registry import adapter_for
from providers.types import ChatRequest, ConfigError, ModelConfig

ENV = {
    "GROQ_API_KEY": "gsk_fake_groq_key_0123456789",
    "DEEPINFRA_TOKEN": "fake-deepinfra-token-0123456789",
    "AZURE_OPENAI_API_KEY": "fakeazurekey0123456789abcdef",
}
#: Text that JSON escapes or that an escaper could get wrong: quotes, backslashes, every
#: control character, non-ASCII (kept as UTF-8, not \\u escapes), emoji, braces (the template
#: is a format string), the private-use characters the template's markers are made of.
AWKWARD = st.lists(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(['"', "\\", "{", "}", "{0}", "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
                         "\u2028", "\ue000", "é", "☃", "𝄞", "😀", "\ufeff", "\\u0041"]),
    ),
    max_size=40,
).map("".join)
SEEDS = st.one_of(st.none(), st.integers(), st.integers(-(2**70), 2**70))
CAPS = st.one_of(st.none(), st.integers(0, 2**40))
KEYS = st.lists(AWKWARD, max_size=3, unique=True).map(tuple)


@st.composite
def configs(draw: st.DrawFn) -> ModelConfig:
    provider = draw(st.sampled_from(["openai", "groq", "deepinfra", "azure"]))
    model = draw(st.sampled_from(["llama-3", "gpt-5-mini", "openai/gpt-oss-120b", "qwen3-32b",
                                  'm"odel\\é']))
    config = ModelConfig(
        name=draw(st.sampled_from(["m", "GPT-5.6 Luna"])),
        provider=provider,
        model=model,
        base_url="https://example.test/v1",
        temperature=draw(st.one_of(st.none(), st.floats(0, 2), st.just(1e-07))),
        max_tokens=draw(CAPS),
        seed=draw(SEEDS),
        reasoning_effort=draw(st.one_of(st.none(), st.just("low"))),
        json_mode=draw(st.booleans()),
        response_format=draw(st.one_of(st.none(), st.sampled_from(
            ["json_schema", "json_object_schema", "grammar"]))),
        fold_system=draw(st.booleans()),
    )
    assume(_taken(config))
    return config


def _taken(config: ModelConfig) -> bool:
    """Whether the adapter takes `config`'s option values: it refuses one its model does not
    (groq's qwen3 and reasoning_effort "low", `providers.openai_compat.ACCEPTED_VALUES`), and
    a test of its bodies has none to compare."""
    try:
        check_values(config, config.provider)
    except ConfigError:
        return False
    return True


@st.composite
def requests(draw: st.DrawFn) -> ChatRequest:
    return ChatRequest(
        request_id=draw(st.text(max_size=8)),
        system=draw(st.one_of(st.just(""), AWKWARD)),
        user=draw(AWKWARD),
        seed=draw(SEEDS),
        keys=draw(KEYS),
        max_tokens=draw(CAPS),
    )


def adapter(config: ModelConfig) -> OpenAICompatAdapter:
    made = adapter_for(config, ENV)
    assert isinstance(made, OpenAICompatAdapter)
    return made


def whole(made: OpenAICompatAdapter, req: ChatRequest) -> tuple[bytes, tuple[str, ...]]:
    """The body as it was built before templates: the whole dict, encoded."""
    body, omitted = build_body(made.config, req, made.dialect, made.model_field)
    return encode(body), omitted


@settings(max_examples=300, deadline=None)
@given(configs(), st.lists(requests(), min_size=1, max_size=6))
def test_every_body_is_byte_identical_to_the_whole_body_encoded(
    config: ModelConfig, reqs: list[ChatRequest]
) -> None:
    made = adapter(config)
    for req in reqs + reqs:  # the second pass is built from the templates the first made
        assert made._template(req) is not None  # every such shape has a template
        built = made.build(req)
        assert (built.body, built.omitted) == whole(made, req)
        assert orjson.loads(built.body)["messages"][-1]["content"].endswith(req.user)


def test_the_bench_request_is_built_from_a_template_and_not_re_encoded() -> None:
    made = adapter(ModelConfig(name="m", provider="openai", model="m", base_url="http://h/v1",
                               max_tokens=64))
    first = ChatRequest("a", "You forecast.", 'P("up")?', seed=1, keys=("probability",))
    second = ChatRequest("b", "Tu prévois.", "P(☃)?\n", seed=2, keys=("probability",))
    assert made.build(first).body == whole(made, first)[0]
    assert made.build(second).body == whole(made, second)[0]
    assert list(made._templates.values()) == [made._template(first)]
    assert made._template(first) is not None


@pytest.mark.parametrize("seed", [True, False])
def test_a_seed_json_writes_otherwise_than_digits_is_encoded_whole(seed: Any) -> None:
    made = adapter(ModelConfig(name="m", provider="openai", model="m", base_url="http://h/v1"))
    req = ChatRequest("a", "s", "u", seed=seed)
    assert made._template(req) is None
    assert made.build(req).body == whole(made, req)[0]
    assert b'"seed":' + (b"true" if seed else b"false") in made.build(req).body


def test_text_that_is_not_utf8_fails_as_the_whole_body_encoder_fails() -> None:
    made = adapter(ModelConfig(name="m", provider="openai", model="m", base_url="http://h/v1"))
    made.build(ChatRequest("a", "s", "u", seed=1))  # the shape's template exists
    lone = ChatRequest("b", "s", "half a pair: \ud800", seed=2)
    with pytest.raises(UnicodeEncodeError):
        whole(made, lone)
    with pytest.raises(UnicodeEncodeError):
        made.build(lone)


def test_templates_stay_bounded_when_answer_keys_vary() -> None:
    made = adapter(ModelConfig(name="m", provider="openai", model="m", base_url="http://h/v1",
                               response_format="json_schema"))
    for i in range(600):
        req = ChatRequest(str(i), "s", "u", seed=i, keys=(f"k{i}",))
        assert made.build(req).body == whole(made, req)[0]
    assert 0 < len(made._templates) <= 256


def test_sent_headers_are_found_whatever_the_case_of_their_name() -> None:
    """A multidict, so aiohttp takes them without copying; still the adapter's headers."""
    made = adapter(ModelConfig(name="m", provider="groq", model="llama-3"))
    headers = made.build(ChatRequest("a", "s", "u")).headers
    assert headers["authorization"] == headers["Authorization"] == "Bearer " + ENV["GROQ_API_KEY"]
    assert dict(headers) == made.headers()
