"""Constrained output: the answer's shape, generated from a query's keys, in each server's form.

A small model left free echoes the prompt or rambles until the output cap; constrained
decoding makes every reply one JSON object with exactly the asked keys, each a probability.
Servers take the constraint in three forms (`RESPONSE_FORMATS`, the spec key
`response_format`):

- `json_schema`: OpenAI's `{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}`
  (OpenAI, Azure, vLLM, Groq, DeepInfra, Vertex's OpenAI endpoint);
- `json_object_schema`: `{"type": "json_object", "schema": {...}}`, the form llama-cpp-python's
  server takes (it answers the OpenAI form with HTTP 500);
- `grammar`: a GBNF grammar in the body's `grammar` field (llama.cpp's server and
  llama-cpp-python). Only a grammar bounds the digits: a schema's `number` lets a greedy small
  model write digits until the cap, and llama.cpp ignores `minimum`/`maximum`, so
  `{"Q01": 2}` passes a schema. The grammar admits `0`, `0.` and one to four digits, `1`,
  `1.0`... `1.0000`, nothing else.

Keys are emitted in the query's order; the strict parser accepts any order, so this loses
nothing and keeps the grammar linear.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

#: Spec values of `response_format`.
RESPONSE_FORMATS: tuple[str, ...] = ("json_schema", "json_object_schema", "grammar")
#: Digits after the decimal point a grammar allows (the prompts ask for four).
MAX_DECIMALS = 4


def answer_schema(keys: Sequence[str]) -> dict[str, Any]:
    """JSON Schema of one answer: an object with exactly `keys`, each a number in [0, 1]."""
    return {
        "type": "object",
        "properties": {key: {"type": "number", "minimum": 0, "maximum": 1} for key in keys},
        "required": list(keys),
        "additionalProperties": False,
    }


def _gbnf_literal(text: str) -> str:
    """A GBNF string literal matching `text` (a JSON-quoted key) exactly."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def answer_grammar(keys: Sequence[str], decimals: int = MAX_DECIMALS) -> str:
    """A GBNF grammar of one answer object with `keys` in order and bounded probabilities."""
    if not keys:
        raise ValueError("an answer grammar needs at least one key")
    if decimals < 1:
        raise ValueError("decimals must be at least 1")
    members = []
    for key in keys:
        quoted = orjson.dumps(key).decode()  # the key as JSON writes it, escapes included
        members.append(f'{_gbnf_literal(quoted)} ws ":" ws prob')
    body = ' ws "," ws '.join(members)
    zero_digits = " ".join(["[0-9]"] + ["[0-9]?"] * (decimals - 1))
    one_digits = " ".join(["\"0\""] + ['"0"?'] * (decimals - 1))
    return "\n".join(
        [
            f'root ::= "{{" ws {body} ws "}}"',
            f'prob ::= "0" ("." {zero_digits})? | "1" ("." {one_digits})?',
            'ws ::= " "?',
        ]
    )


def constraint_fields(kind: str, keys: Sequence[str]) -> dict[str, Any]:
    """The body fields that carry the constraint `kind` for an answer with `keys`."""
    if kind == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": answer_schema(keys)},
            }
        }
    if kind == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": answer_schema(keys)}}
    if kind == "grammar":
        return {"grammar": answer_grammar(keys)}
    raise ValueError(f"response_format must be one of {', '.join(RESPONSE_FORMATS)}, not {kind!r}")


def fold_system(system: str, user: str) -> str:
    """The user turn carrying the system message, for chat templates without a system role
    (Gemma's: llama-cpp-python's `--chat_format gemma` drops a system message silently)."""
    if not system:
        return user
    return f"{system}\n\n{user}"


__all__ = [
    "MAX_DECIMALS",
    "RESPONSE_FORMATS",
    "answer_grammar",
    "answer_schema",
    "constraint_fields",
    "fold_system",
]
