"""Request bodies are encoded by the standard library (orjson's encoding of every body left
memory behind in a long dispatch, issue 9); the bytes sent are the same as before."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from providers.openai_compat import encode

BODIES: list[dict[str, Any]] = [
    {
        "model": "openai/gpt-oss-120b",
        "messages": [
            {"role": "system", "content": "Answer in JSON only."},
            {"role": "user", "content": 'café — "quoted" \\ back\nslash\ttab \u0001 ☃ 𝄞'},
        ],
        "temperature": 1.0,
        "top_p": 0.95,
        "seed": 2_147_483_647,
        "max_tokens": 8192,
        "stop": None,
        "stream": False,
        "response_format": {"type": "json_schema", "json_schema": {"strict": True}},
    },
    {"contents": [{"parts": [{"text": "x" * 3000}]}], "generationConfig": {"temperature": 0.7}},
    {"messages": [], "temperature": 0.0, "nested": [[1, 2.5], {"k": [True, False, None]}]},
]


@pytest.mark.parametrize("body", BODIES)
def test_a_body_is_encoded_byte_for_byte_as_orjson_did(body: dict[str, Any]) -> None:
    assert encode(body) == orjson.dumps(body)
    assert orjson.loads(encode(body)) == body


def test_a_body_that_is_not_json_is_refused() -> None:
    with pytest.raises(ValueError):
        encode({"temperature": float("nan")})
