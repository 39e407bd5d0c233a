"""Turning a model's reply into probabilities, or refusing to.

Strict mode is the paper's rule (Appendix C): the reply is one JSON object with exactly
the requested keys, each value a JSON number in [0, 1]. Lenient mode (opt-in per
campaign) also takes the forms models commonly write: code fences or prose around one
object, and values such as "11/36", "35%", "1e-3" or "0.35" (quoted or bare).

The one rule both modes share: a reply the parser is not sure of is rejected, never
guessed. "0,35" (decimal comma or two numbers?), "35" (a percent without its sign?),
"1/0", ".5.5", unicode digits, two candidate objects, duplicate keys: all rejected with a
subcause, so the engine re-asks and the ledger records why. A community benchmark once
read "11/36" as 0.11 and "0,35" as 0.0; these are the strings the tests attack.

Every failure is an `AnswerError`; nothing else escapes `parse_answer`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import orjson

Mode = Literal["strict", "lenient"]

SUBCAUSES: tuple[str, ...] = (
    "not_json",
    "missing_key",
    "extra_key",
    "out_of_range",
    "not_a_number",
    "ambiguous",
)

#: Replies longer than this are not scanned (no answer object is this long).
MAX_REPLY_CHARS = 1_000_000


class AnswerError(ValueError):
    """Why a reply was not accepted; `subcause` is one of `SUBCAUSES`."""

    def __init__(self, subcause: str, detail: str) -> None:
        if subcause not in SUBCAUSES:
            raise ValueError(f"unknown answer subcause {subcause!r}")
        super().__init__(f"{subcause}: {detail}")
        self.subcause = subcause
        self.detail = detail


def _excerpt(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


# --------------------------------------------------------------------------- numbers

_DECIMAL = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN = re.compile(rf"[+-]?{_DECIMAL}(?:[eE][+-]?\d+)?")
_PERCENT = re.compile(rf"([+-]?{_DECIMAL})\s*%")
_FRACTION = re.compile(r"([+-]?\d+)\s*/\s*(\d+)")
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


#: A number in scientific notation, its parts: what an exponent too large for `Decimal` (past
#: about 10^18 digits) leaves to read.
_SCIENTIFIC = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)[eE]([+-]?)\d+", re.ASCII)
#: A magnitude below every float's, in `Decimal`'s reach: what such a number's is, exactly
#: enough to place it in [0, 1] and to read as 0.0.
_BELOW_EVERY_FLOAT = "1e-999999999"


def _decimal(token: str) -> Decimal:
    try:
        return Decimal(token)
    except (InvalidOperation, ValueError) as exc:
        # Only an exponent too large for Decimal gets here. Its mantissa and the exponent's
        # sign still place it: `0e99999999999999999999` is exactly 0 and `1e-9999...` a
        # positive number below every float (JSON numbers in [0, 1], which the paper's rule
        # accepts, and were refused as "too extreme"); with a positive exponent, outside.
        parts = _SCIENTIFIC.fullmatch(token)
        if parts is None:
            raise AnswerError("not_a_number", f"{_excerpt(token)} is not a number") from exc
        sign, mantissa, exponent_sign = parts.groups()
        if not mantissa.replace(".", "").strip("0"):
            return Decimal(0)
        if exponent_sign == "-":
            return Decimal(f"{sign}{_BELOW_EVERY_FLOAT}")
        raise AnswerError("out_of_range", f"{_excerpt(token)} is outside [0, 1]") from exc


def _in_unit_interval(value: Decimal, shown: str) -> float:
    if value.is_nan() or value.is_infinite():
        raise AnswerError("not_a_number", f"{_excerpt(shown)} is not finite")
    if value < 0 or value > 1:
        raise AnswerError("out_of_range", f"{_excerpt(shown)} is outside [0, 1]")
    return float(value) + 0.0  # + 0.0 turns -0.0 into 0.0


def lenient_number(token: str) -> float:
    """One value written as a decimal, percentage, fraction or in scientific notation."""
    text = token.strip()
    if not text.isascii():
        raise AnswerError("not_a_number", f"{_excerpt(text)} has non-ASCII characters")
    if _PLAIN.fullmatch(text):
        return _in_unit_interval(_decimal(text), text)
    match = _PERCENT.fullmatch(text)
    if match:
        return _in_unit_interval(_decimal(match.group(1)) / 100, text)
    match = _FRACTION.fullmatch(text)
    if match:
        numerator, denominator = _decimal(match.group(1)), _decimal(match.group(2))
        if denominator == 0:
            raise AnswerError("not_a_number", f"{_excerpt(text)} divides by zero")
        if numerator < 0 or numerator > denominator:  # exact, before any rounding
            raise AnswerError("out_of_range", f"{_excerpt(text)} is outside [0, 1]")
        return _in_unit_interval(numerator / denominator, text)
    if _DECIMAL_COMMA.fullmatch(text):
        raise AnswerError(
            "ambiguous", f"{_excerpt(text)}: a decimal comma or two numbers? not guessing"
        )
    raise AnswerError("not_a_number", f"{_excerpt(text)} is not a number")


# --------------------------------------------------------------------------- strict


class _Duplicate(Exception):
    pass


class _NonFinite(Exception):
    pass


def _pairs_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise _NonFinite(name)


class _Number:
    """A JSON number kept as its literal so range checks are exact and never overflow."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _load_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(
            text,
            parse_float=_Number,
            parse_int=_Number,
            parse_constant=_reject_constant,
            object_pairs_hook=_pairs_no_duplicates,
        )
    except _Duplicate as exc:
        raise AnswerError("ambiguous", f"key {_excerpt(str(exc))} appears twice") from None
    except _NonFinite as exc:
        raise AnswerError("not_a_number", f"{exc} is not a number in [0, 1]") from None
    except (ValueError, RecursionError) as exc:
        raise AnswerError("not_json", f"not a JSON object ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise AnswerError("not_json", "the reply is JSON but not an object")
    return value


def _check_keys(found: Sequence[str], keys: Sequence[str]) -> None:
    wanted = set(keys)
    missing = [k for k in keys if k not in set(found)]
    if missing:
        raise AnswerError("missing_key", f"missing {', '.join(map(_excerpt, missing[:5]))}")
    extra = [k for k in found if k not in wanted]
    if extra:
        raise AnswerError("extra_key", f"unexpected {', '.join(map(_excerpt, extra[:5]))}")


def _strict(text: str, keys: Sequence[str]) -> dict[str, float]:
    # Not stripped: `json.loads` allows JSON's whitespace around the value (space, tab, LF,
    # CR) and no other, where `str.strip` also took a no-break space or a form feed.
    obj = _load_object(text)
    _check_keys(list(obj), keys)
    out: dict[str, float] = {}
    for key in keys:
        value = obj[key]
        if not isinstance(value, _Number):
            kind = "true/false" if isinstance(value, bool) else type(value).__name__
            raise AnswerError("not_a_number", f"{_excerpt(key)} is {kind}, not a JSON number")
        out[key] = _in_unit_interval(_decimal(value.literal), value.literal)
    return out


# --------------------------------------------------------------------------- lenient


def _candidate_objects(text: str) -> tuple[list[str], int]:
    """Top-level `{...}` spans (quotes respected inside them) and count of stray braces."""
    spans: list[str] = []
    stray = 0
    depth = 0
    start = 0
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if depth > 0 and in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}":
            if depth == 0:
                stray += 1
            else:
                depth -= 1
                if depth == 0:
                    spans.append(text[start : index + 1])
        elif char == '"' and depth > 0:
            in_string = True
    if depth > 0:
        stray += 1
    return spans, stray


_KEY = re.compile(r"\s*(?:\"((?:[^\"\\]|\\.)*)\"|'([^'\\]*)'|([A-Za-z_][A-Za-z0-9_]*))\s*:\s*")
_STRING_VALUE = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'([^'\\]*)'")
_BARE_VALUE = re.compile(r"[^,{}\[\]\"']*")
_SEPARATOR = re.compile(r"\s*(,)?\s*")


def _lenient_pairs(obj: str) -> list[tuple[str, str]]:
    """Split one flat object into (key, value text) pairs, tolerating bare tokens."""
    inner = obj[1:-1]
    pairs: list[tuple[str, str]] = []
    position = 0
    while True:
        sep = _SEPARATOR.match(inner, position)
        assert sep is not None  # the pattern matches the empty string
        position = sep.end()
        if position >= len(inner):
            break
        if pairs and sep.group(1) is None:
            raise AnswerError("not_json", "values are not separated by commas")
        if not pairs and sep.group(1) is not None:
            raise AnswerError("not_json", "the object starts with a comma")
        key_match = _KEY.match(inner, position)
        if key_match is None:
            if pairs and re.match(r"\d", inner[position:]):
                raise AnswerError(
                    "ambiguous", "a comma inside a number (decimal comma?); not guessing"
                )
            raise AnswerError("not_json", f"no key at {_excerpt(inner[position:])}")
        key_text = key_match.group(1)
        if key_text is not None:
            try:
                key = json.loads(f'"{key_text}"')
            except ValueError:
                raise AnswerError("not_json", f"bad key {_excerpt(key_text)}") from None
        else:
            key = key_match.group(2) if key_match.group(2) is not None else key_match.group(3)
        position = key_match.end()
        if position < len(inner) and inner[position] in "{[":
            raise AnswerError("not_a_number", f"{_excerpt(key)} holds a nested value")
        string_match = _STRING_VALUE.match(inner, position)
        if string_match is not None:
            raw = string_match.group(1)
            if raw is not None:
                try:
                    value = str(json.loads(f'"{raw}"'))
                except ValueError:
                    raise AnswerError("not_json", f"bad string {_excerpt(raw)}") from None
            else:
                value = string_match.group(2)
            position = string_match.end()
        else:
            bare = _BARE_VALUE.match(inner, position)
            assert bare is not None
            value = bare.group(0)
            position = bare.end()
            if position < len(inner) and inner[position] in "{}[]\"'":
                raise AnswerError("not_a_number", f"{_excerpt(key)} has a malformed value")
        pairs.append((key, value))
    return pairs


def _lenient(text: str, keys: Sequence[str]) -> dict[str, float]:
    spans, stray = _candidate_objects(text)
    if not spans:
        raise AnswerError("not_json", f"no JSON object in {_excerpt(text.strip())}")
    if len(spans) > 1:
        raise AnswerError("ambiguous", f"{len(spans)} candidate objects; expected exactly one")
    if stray:
        raise AnswerError("ambiguous", "unbalanced braces around the answer object")
    pairs = _lenient_pairs(spans[0])
    found = [k for k, _ in pairs]
    if len(set(found)) != len(found):
        raise AnswerError("ambiguous", "a key appears twice")
    _check_keys(found, keys)
    values = dict(pairs)
    return {key: _lenient_value(key, values[key]) for key in keys}


def _lenient_value(key: str, value: str) -> float:
    token = value.strip()
    if token.lower() in {"true", "false", "null", "none", "nan", "infinity", "-infinity", "inf"}:
        raise AnswerError("not_a_number", f"{_excerpt(key)} is {token}, not a probability")
    return lenient_number(token)


# --------------------------------------------------------------------------- the common reply

def _plain_answer(text: str, keys: Sequence[str]) -> dict[str, float] | None:
    """The reply nearly every model writes, read at C speed; None when it is anything else.

    A JSON object of exactly `keys`, each a JSON number strictly inside (0, 1): both modes
    accept it, with these values (the float of the literal, correctly rounded, is what the
    exact parsers return too; a float strictly inside (0, 1) comes from a literal inside it).
    Anything else (0 or 1 exactly, an integer, a string, a duplicate key, prose around the
    object) goes to the mode's own parser, which decides and says why. The parsers took
    15-30 µs a reply, about 2 µs this way.

    orjson keeps the last of duplicate keys silently, so duplicates are ruled out first by
    counting quotes: k keys with number values are exactly 2k of them, and an object with
    a key twice has at least k + 1 key strings (an escaped quote only sends a reply to the
    full parser). orjson reads the object in about a fifth of the standard library's time.
    """
    if text.count('"') != 2 * len(keys):
        return None
    try:
        obj = orjson.loads(text)
    except Exception:  # not JSON (a lone surrogate too), or too deep: the full parser says which
        return None
    if type(obj) is not dict or len(obj) != len(keys):
        return None
    out: dict[str, float] = {}
    for key in keys:
        value = obj.get(key)
        if type(value) is not float or not 0.0 < value < 1.0:
            return None
        out[key] = value
    return out if len(out) == len(obj) else None  # `keys` named one twice: not this path


# --------------------------------------------------------------------------- entry point


def parse_answer(text: str, keys: Sequence[str], mode: Mode | str = "strict") -> dict[str, float]:
    """The probabilities of `keys` in `text`, or `AnswerError(subcause, detail)`.

    `keys` are the JSON keys the prompt asked for (`("probability",)` or `("Q01", ...)`).
    """
    if mode not in ("strict", "lenient"):
        raise ValueError(f"parser mode must be 'strict' or 'lenient', not {mode!r}")
    if not isinstance(text, str):
        raise AnswerError("not_json", f"the reply is {type(text).__name__}, not text")
    if len(text) > MAX_REPLY_CHARS:
        raise AnswerError("not_json", f"the reply is {len(text)} characters long")
    if not keys:
        raise ValueError("parse_answer needs at least one key")
    plain = _plain_answer(text, keys)
    if plain is not None:
        return plain
    try:
        return _strict(text, keys) if mode == "strict" else _lenient(text, keys)
    except AnswerError:
        raise
    except Exception as exc:  # a parser bug must read as a rejection, never a crash
        raise AnswerError("not_json", f"unparseable ({type(exc).__name__})") from None
