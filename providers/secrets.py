"""Keeping credentials out of everything a run prints or writes.

A key must never reach a log line, an exception, a repr or the ledger: runs are shared,
attempt details are written to Parquet, and a leaked key costs money. Adapters hold keys as
`Secret` (whose repr and str are masked), declare the values to mask (`Adapter.secrets`), and
pass any provider text through `redact` before it can become a `Failure.detail`; the engine's
log passes every field through the same `redact`, with the same `MASK`.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from providers.types import Completion, ConfigError, Failure

MASK = "***"
#: Values shorter than this are not treated as secrets: masking "1" or "us" everywhere would
#: garble details while protecting nothing (no real credential is that short).
MIN_SECRET_LENGTH = 6


class _Forms:
    """What `_masked` looks for: the secret `values` (longest first: a key holding another is
    masked whole; a cut key's head is one of theirs), masked where they occur, the values
    a server may echo otherwise spelled (`spelled`: percent-encoded, JSON-escaped), and
    their `cores` (what every base64 encoding of a text holding a value holds,
    `_base64_cores`), masked with the base64 run around them."""

    __slots__ = ("cores", "searched", "spelled", "values")

    def __init__(
        self, values: tuple[str, ...], cores: tuple[str, ...], spelled: tuple[_Spelled, ...]
    ) -> None:
        self.values, self.cores, self.spelled = values, cores, spelled
        self.searched = cores + values

    def found_in(self, text: str) -> bool:
        return any(form in text for form in self.searched) or any(
            spelled.anchor in text and spelled.pattern.search(text) for spelled in self.spelled
        )


class _Spelled:
    """A secret `value` holding characters a server may echo otherwise spelled
    (`_spellings`), and the `pattern` matching it with each such character spelled any of
    its ways, character by character (so a URL's `quote(key)`, which leaves `/` alone, and
    Go's PathEscape, which leaves `+` and `=`, are matched too, in either hex case). The
    pattern is searched only where the text holds its `anchor`, the value's longest run of
    characters spelled one way: nearly every reply holds no secret, and is redacted on the
    event loop."""

    __slots__ = ("_head", "anchor", "longest", "pattern", "spellings", "value")

    def __init__(self, value: str, spellings: list[tuple[str, ...]]) -> None:
        self.value, self.spellings = value, spellings
        self.pattern = re.compile("".join(map(_spelled_pattern, spellings)))
        runs = re.split("|".join(re.escape(c) for c, *other in spellings if other), value)
        self.anchor = max(runs, key=len)
        self._head: re.Pattern[str] | None = None
        self.longest = sum(len(max(ways, key=len)) for ways in spellings)  # spelled out

    def head_start(self, kept: str) -> int | None:
        """Where the longest head of the value, spelled any of its ways (`_head_pattern`),
        that ends `kept` starts, if one does. Its pattern is built at the first text cut
        short: few replies are."""
        if self._head is None:
            self._head = re.compile(_head_pattern(self.spellings))
        match = self._head.search(kept, max(0, len(kept) - self.longest))
        return None if match is None else match.start()


@functools.lru_cache(maxsize=1024)  # a long token repeats its few characters
def _spellings(char: str) -> tuple[str, ...]:
    """The ways a server may echo `char` of a key: as itself, percent-encoded (every
    encoder's `%XX`, whatever it leaves alone, and `quote_plus`'s `+` for a space) and
    JSON-escaped (non-ASCII as \\u, and `/` as `\\/` too, which some servers write). A
    key percent-encoded the common way (`quote(key)`, leaving its `/`) was kept whole."""
    ways = {char, quote(char, safe=""), json.dumps(char)[1:-1]}
    ways |= {"+"} if char == " " else {"\\/"} if char == "/" else set()
    return (char, *sorted(ways - {char}))


def _head_pattern(spellings: list[tuple[str, ...]]) -> str:
    """A pattern matching a head of a value (`_Spelled`) at the end of a text: its first
    `MIN_CUT_HEAD` characters spelled any of their ways, then each next one so, or cut
    inside its escape (`%2` of `%2B`), or not there, the text having ended. A key quoted
    into a URL and cut at the detail limit left "Xq7%2BHk2%2FPmXw9RtLb4NvC8Jd%2FY3FgS6aB%"."""
    head = "".join(map(_spelled_pattern, spellings[:MIN_CUT_HEAD]))
    for ways in spellings[MIN_CUT_HEAD:]:
        cut = dict.fromkeys(way[:n] for way in ways[1:] for n in range(1, len(way)))
        cut_alone = "".join(f"|(?i:{re.escape(part)})\\Z" for part in cut)
        head += f"(?:{_spelled_pattern(ways)}{cut_alone}|\\Z)"
    return head + r"\Z"


@functools.lru_cache(maxsize=1024)
def _spelled_pattern(ways: tuple[str, ...]) -> str:
    """A pattern matching any of `ways` (`_spellings`: the character, then its escapes, whose
    hex, `%2B` or `\\u00E9`, may come in either case)."""
    char, *escapes = map(re.escape, ways)
    return f"(?:{char}|(?i:{'|'.join(escapes)}))" if escapes else char


class Secret:
    """A credential value that only `reveal()` gives back; every other view is masked."""

    __slots__ = ("_forms", "_value")

    def __init__(self, value: str) -> None:
        self._value = value
        self._forms: _Forms | None = None

    def reveal(self) -> str:
        """The raw value, for exactly one place: the outgoing header."""
        return self._value

    def forms(self) -> _Forms:
        """The value's encoded forms, worked out once: every reply is redacted against them,
        on the event loop."""
        if self._forms is None:
            self._forms = _forms_of(self._value)
        return self._forms

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> tuple[object, ...]:  # pickling would write the key to disk
        raise TypeError("Secret values are not picklable")


def _forms_of(value: str) -> _Forms:
    """`value`'s encoded forms (`_Forms`); none for a value too short to be a secret."""
    if len(value) < MIN_SECRET_LENGTH:
        return _Forms((), (), ())
    spellings = [_spellings(char) for char in value]
    spelled = (_Spelled(value, spellings),) if any(len(w) > 1 for w in spellings) else ()
    return _Forms((value,), _base64_cores(value), spelled)


def _base64_cores(value: str) -> tuple[str, ...]:
    """What the base64 of any text holding `value` holds, whatever the text before it: for
    each of the three alignments (k bytes before it, k = 0, 1, 2), base64(k zero bytes +
    value) without the characters the k bytes touch (the first ceil(8k/6)) nor those the
    bytes after it would touch (past the first floor(8n/6), for n bytes in all). A key in
    `Basic base64("user:" + key)` was kept whole."""
    raw = value.encode()
    cores = []
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + raw).decode()
        cores.append(encoded[-(-8 * k // 6) : 8 * (k + len(raw)) // 6])
    return tuple(dict.fromkeys(cores))


_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _mask_base64_runs(text: str, core: str) -> str:
    """`text` with every run of base64 characters holding `core` masked whole: the rest of
    the run encodes the key's neighbours (`user:` of a Basic credential), and its ends the
    key's own first and last bytes."""
    at = text.find(core)
    while at != -1:
        start, end = at, at + len(core)
        while start and text[start - 1] in _BASE64_CHARS:
            start -= 1
        while end < len(text) and text[end] in _BASE64_CHARS:
            end += 1
        text = text[:start] + MASK + text[end:]
        at = text.find(core, start + len(MASK))
    return text


#: What `providers.base.short` ends a text it cut with. The cut may fall inside a key that
#: the text quoted, and the head it leaves no longer equals the key's value.
CUT_MARK = "…"
#: A cut key's head shorter than this is left alone: it says nothing of the key, and a match
#: that short is as likely the last letters of an ordinary word.
MIN_CUT_HEAD = 4


#: The shortest head of a base64 core (`_base64_cores`) a cut base64 run is masked for: the
#: characters `MIN_CUT_HEAD` bytes of a key take (6), so no more of it is left than of a key
#: cut as itself.
MIN_CUT_BASE64 = -(-8 * MIN_CUT_HEAD // 6)


def _mask_cut_head(text: str, masks: _Forms) -> str:
    """`text` with what its cut (`CUT_MARK`) left at its end of a known value masked: a head
    of the value, as itself or otherwise spelled (`_Spelled.head_start`), or a base64 run
    ending in a head of one of its cores (masked whole, as `_mask_base64_runs` does). The
    base64 of `user:key` cut at the detail limit left 31 of a key's 35 characters to read."""
    kept = text[: -len(CUT_MARK)]
    starts = [_cut_value_start(kept, masks), _cut_base64_start(kept, masks.cores)]
    start = min((at for at in starts if at is not None), default=None)
    return text if start is None else kept[:start] + MASK + CUT_MARK


def _cut_value_start(kept: str, masks: _Forms) -> int | None:
    """Where the head of a value (the longest value first) that ends `kept` starts."""
    spelled = {each.value: each for each in masks.spelled}
    for value in masks.values:
        speller = spelled.get(value)
        start = _head_start(kept, value) if speller is None else speller.head_start(kept)
        if start is not None:
            return start
    return None


def _cut_base64_start(kept: str, cores: Iterable[str]) -> int | None:
    """Where the base64 run ending `kept` starts, if it ends in a head of one of `cores`
    (`MIN_CUT_BASE64` characters or more)."""
    start = len(kept)
    while start and kept[start - 1] in _BASE64_CHARS:
        start -= 1
    run = kept[start:]
    if len(run) >= MIN_CUT_BASE64 and any(
        _head_start(run, core, MIN_CUT_BASE64) is not None for core in cores
    ):
        return start
    return None


def _head_start(kept: str, value: str, least: int = MIN_CUT_HEAD) -> int | None:
    """Where the longest head of `value` (`least` characters or more, not all of it)
    that ends `kept` starts, if one does. Only the places where the value's first characters
    occur are tried: trying every length, each a new slice, took 48 µs for a 1,500-character
    token and 1.5 ms for ten session tokens beside a long reply."""
    first = value[:least]
    at = kept.find(first, max(0, len(kept) - len(value) + 1))
    while at != -1:
        if value.startswith(kept[at:]):
            return at
        at = kept.find(first, at + 1)
    return None


#: Credential shapes masked even when their value was never handed to `redact`: a key from
#: another provider echoed back, a token a proxy minted, a private key in a stack trace.
#: Values only a provider knows the shape of (an AWS secret key, a session token, a
#: DeepInfra or Azure key) are masked by value: adapters declare them (`Adapter.secrets`).
_SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"  # PEM
    r"|(Bearer\s+)[A-Za-z0-9._~+/-]{16,}=*"  # any bearer credential (OAuth token, API key)
    r"|\bsk-[A-Za-z0-9_-]{8,}"  # OpenAI keys
    r"|\bgsk_[A-Za-z0-9]{8,}"  # Groq keys
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{12,}"  # AWS access key ids (long-term, temporary)
    r"|\bABSK[A-Za-z0-9+/=]{16,}"  # Bedrock API keys
    r"|\bya29\.[A-Za-z0-9._-]{8,}"  # Google OAuth access tokens
    r"|\bAIza[0-9A-Za-z_-]{20,}"  # Google API keys
    r"|([?&](?:key|api[_-]?key|access_token|token|auth|password|secret|sig)=)"  # keys in
    r"[^&\s\"']+",  # query strings
    re.IGNORECASE | re.DOTALL,
)


#: A substring (lower case) that every match of `_SHAPES` holds: text holding none of them
#: skips the pattern, which costs about 7 µs on a short reply where this check costs 1 (every
#: reply is redacted, on the event loop).
_SHAPE_ANCHORS = (
    "-----begin", "bearer", "sk-", "gsk_", "akia", "asia", "absk", "ya29.", "aiza",
    "key=", "token=", "auth=", "password=", "secret=", "sig=",
)  # fmt: skip


def _may_hold_shape(text: str) -> bool:
    lowered = text.lower()
    return any(anchor in lowered for anchor in _SHAPE_ANCHORS)


def looks_like_credential(text: str) -> bool:
    """Whether `text` holds a credential, as a spec's value (`runs.spec` refuses it, never
    showing it): a match of `_KEY_SHAPES` of at least `_CREDENTIAL_CHARS` characters holding
    a digit, not inside a word, or a query string's value that is one; and an AWS access key
    id's exact shape (`_AWS_KEY_ID`) with or without a digit, whose 16 characters after
    AKIA or ASIA may all be letters ("AKIAABCDEFGHIJKLMNOP" passed, and was frozen into the
    run folder), a suffix after it or not ("AKIAABCDEFGHIJKLMNOP-x"). Stricter than the
    masking, which may mask a look-alike at no cost: a spec must not refuse a model id
    "llama-3-8b-sk-instruct", an Azure resource "proj-sk-prod-eastus2-001", a GCP project
    "asiaforecasting2024", a lab "Aizawa", a name ending in a key id's letters
    "lab-AKIAABCDEFGHIJKLMNOP", or a price source's "?key=pricing2025" link."""
    if not _may_hold_shape(text):
        return False
    if _AWS_KEY_ID.search(text):
        return True
    for match in _KEY_SHAPES.finditer(text):
        token = match.group(0)
        if match.group(2) is not None:  # `?key=value`: a key where the value is shaped like one
            if looks_like_credential(token[len(match.group(2)) :]):
                return True
            continue
        if match.start() and text[match.start() - 1] in "-._":  # inside a word or a name
            continue
        if len(token) >= _CREDENTIAL_CHARS and any(c.isdigit() for c in token):
            return True
    return False


def looks_like_unprefixed_key(name: str) -> bool:
    """Whether a variable's "name" (a spec's `api_key_env`) is a key pasted in its place:
    `_UNPREFIXED_KEY_CHARS` characters or more, a digit among them and no underscore (the
    random keys of DeepInfra, Azure and Together carry no prefix `looks_like_credential`
    knows; a variable's name has words joined by `_`). It was printed in the run's "set
    <key> first" line and frozen into the run folder."""
    return (
        len(name) >= _UNPREFIXED_KEY_CHARS and "_" not in name and any(c.isdigit() for c in name)
    )


#: `_SHAPES` with its prefixes in the case keys have them ("AIza", "ASIA", "sk-"): what a
#: spec is searched with (`looks_like_credential`), where "Aizawa" is a name, not a key.
_KEY_SHAPES = re.compile(_SHAPES.pattern, re.DOTALL)
#: An AWS access key id: AKIA (long-term) or ASIA (temporary) and 16 upper-case letters or
#: digits, 20 characters, not inside a word, nor at the end of a name (`-._` before it, as
#: "lab-AKIA..."). A `-._` after it is a suffix, how a key gets pasted ("AKIA...-x" passed
#: while the digit-bearing key, read by `_KEY_SHAPES`, was refused): refused.
_AWS_KEY_ID = re.compile(r"(?<![\w.-])(?:AKIA|ASIA)[A-Z0-9]{16}(?![^\W_])")
#: The shortest credential `looks_like_credential` takes for one (every provider's keys and
#: AWS's access key ids are longer; the shapes' prefixes count).
_CREDENTIAL_CHARS = 16
#: The shortest key without a known prefix `looks_like_unprefixed_key` takes for one, where
#: only a variable's name may stand (DeepInfra's keys are 32 characters, Azure's 32 hex).
_UNPREFIXED_KEY_CHARS = 20


def _mask_shape(match: re.Match[str]) -> str:
    """The mask, keeping the `Bearer ` or `?key=` that says what was there."""
    return (match.group(1) or match.group(2) or "") + MASK


def redact(text: str, secrets: Iterable[str | Secret] = ()) -> str:
    """`text` with every known secret value (also percent-encoded, JSON-escaped or inside
    base64, `_Forms`), and anything shaped like a credential, masked.

    The one redaction of the project: adapters pass failure text through it before it can
    reach the ledger, and the engine's log passes every field through it. Values shorter
    than `MIN_SECRET_LENGTH` are not treated as secrets.
    """
    return _masked(text, _values(secrets))


def _values(secrets: Iterable[str | Secret]) -> _Forms:
    """The secret values to mask, and their encoded forms (a `Secret`'s worked out once)."""
    held = [(s if isinstance(s, Secret) else Secret(s)).forms() for s in secrets]
    forms = [f for f in held if f.values]
    if len(forms) == 1:  # the common case: one key
        return forms[0]
    spelled = {s.value: s for f in forms for s in f.spelled}
    return _Forms(
        _longest_first(v for f in forms for v in f.values),
        _longest_first(core for f in forms for core in f.cores),
        tuple(spelled[v] for v in _longest_first(spelled)),
    )


def _longest_first(texts: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(texts), key=len, reverse=True))


def _masked(text: str, masks: _Forms) -> str:
    # Repeat until stable: a replacement can splice a new occurrence together (a key made of
    # asterisks, or one secret's tail next to another). Each pass shortens the text (a form
    # or a base64 run is longer than the mask), so it ends.
    changed = True
    while changed:
        changed = False
        for core in masks.cores:  # first: a base64 run holding a form is masked whole
            if core in text:
                text = _mask_base64_runs(text, core)
                changed = True
        for value in masks.values:
            if value in text:
                text = text.replace(value, MASK)
                changed = True
        for spelled in masks.spelled:
            if spelled.anchor in text:
                text, masked = spelled.pattern.subn(MASK, text)
                changed = changed or bool(masked)
    if masks.values and text.endswith(CUT_MARK):  # a detail cut short before it was redacted
        text = _mask_cut_head(text, masks)
    return _SHAPES.sub(_mask_shape, text) if _may_hold_shape(text) else text


#: The strings of a reply the ledger keeps: a server or proxy can echo the key into any of
#: them (a header it copies into `x-request-id`, a model shown it into the text).
_FAILURE_KEPT = ("detail", "raw_text", "provider_request_id", "finish_reason")
_COMPLETION_KEPT = ("text", "provider_request_id", "model_reported", "finish_reason")


def _redacted(record: Any, kept: tuple[str, ...], secrets: Iterable[str | Secret]) -> Any:
    """`record` (a `Failure` or `Completion`) with its `kept` strings redacted."""
    masks = _values(secrets)
    texts = [(name, getattr(record, name)) for name in kept]
    # One look at them all first: nearly every reply holds nothing to mask, and each is
    # redacted on the event loop (one check of the joined strings, not four).
    joined = "\n".join(text for _, text in texts if text)
    if not (masks.found_in(joined) or CUT_MARK in joined or _may_hold_shape(joined)):
        return record
    changed = {
        name: masked
        for name, text in texts
        if text is not None and (masked := _masked(text, masks)) != text
    }
    return replace(record, **changed) if changed else record


def redact_failure(failure: Failure, secrets: Iterable[str | Secret]) -> Failure:
    """`failure` as the ledger may keep it: every string the server sent (the detail, the raw
    text, the request id and the finish reason) redacted."""
    redacted: Failure = _redacted(failure, _FAILURE_KEPT, secrets)
    return redacted


def redact_result(
    result: Completion | Failure, secrets: Iterable[str | Secret]
) -> Completion | Failure:
    """An adapter's parsed reply as the ledger may keep it: a failure's strings
    (`redact_failure`), and a completion's text, request id, reported model and finish
    reason, redacted. A reply of 200 can carry the key too: a proxy that echoes the request
    (into its body or its request-id header), or a model shown it, writes it into the answer."""
    if isinstance(result, Failure):
        return redact_failure(result, secrets)
    redacted: Completion = _redacted(result, _COMPLETION_KEPT, secrets)
    return redacted


def first_set(env: Mapping[str, str], names: Iterable[str]) -> tuple[str, Secret] | None:
    """The first of `names` set (not blank) in `env`, its value without surrounding
    whitespace and wrapped as a `Secret`. A key read from a Windows `.env` file ends in a
    carriage return, which no HTTP header may hold: every attempt failed before it was sent,
    said "adapter failed: ValueError" and counted as a provider outage, so a value still
    holding a control character is a `ConfigError` naming the variable (never the value)."""
    for name in names:
        if value := credential_value(env, name):
            return name, Secret(value)
    return None


def credential_value(env: Mapping[str, str], name: str) -> str:
    """The credential variable `name` of `env` without surrounding whitespace ('' when unset
    or blank), as `first_set` reads it: a `ConfigError` naming the variable (never the
    value) if a control character is left in it. Bedrock's and Vertex's keys and tokens
    are read so too."""
    value = (env.get(name) or "").strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(
            f"{name} holds a control character (a line end from a Windows .env file?), "
            "which no HTTP header may carry: set it to the key alone"
        )
    return value
