"""The contract every provider adapter fulfils, and the few helpers they all need.

An adapter is pure: it turns one `ChatRequest` into one `HttpRequest` and one reply into a
`Completion` or a classified `Failure`. Retries, pacing and I/O belong to the engine, so an
adapter can be tested on canned bytes and reused against the simulator or the real service.
The only side effect allowed is refreshing a credential (an OAuth token) inside `build`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import orjson

from providers.secrets import CUT_MARK, Secret
from providers.types import ChatRequest, Completion, Failure, HttpRequest, Outcome

#: How many characters of a provider's error text a `Failure.detail` keeps (the ledger stays small).
DETAIL_LIMIT = 300


@runtime_checkable
class Adapter(Protocol):
    """Speaks one model's wire format; see module docstring for what it must not do.

    `provider`, `may_block` and `secrets()` are everything the engine asks of an adapter
    besides `build` and `parse`.
    """

    @property
    def provider(self) -> str:
        """The provider name recorded with every attempt (`groq`, `azure`, ...)."""
        ...

    @property
    def may_block(self) -> bool:
        """Whether `build` may block its thread (a token refresh, a credential-chain lookup).

        The engine then builds on worker threads; others build on the event loop (threading
        every build cost about a third of the dispatch throughput).
        """
        ...

    def secrets(self) -> tuple[Secret, ...]:
        """The credential values this adapter holds now (keys, AWS secrets and session
        tokens, issued OAuth tokens): the engine masks them wherever it writes text."""
        ...

    def build(self, req: ChatRequest) -> HttpRequest:
        """Return the full HTTP request for one elicitation."""
        ...

    def parse(self, status: int, headers: Mapping[str, str], body: bytes) -> Completion | Failure:
        """Classify one reply: a completion, or a failure with its retry hints."""
        ...


class Headers(Mapping[str, str]):
    """Case-insensitive read-only view of response headers.

    HTTP header names are case-insensitive, but the engine hands adapters plain dicts (and
    aiohttp's `CIMultiDict` is not what every caller has), so adapters look names up here.
    """

    def __init__(self, raw: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, str] = {}
        for key, value in (raw or {}).items():
            self._items[key.lower()] = value

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def get_first(self, *names: str) -> str | None:
        """The first present, non-empty value among `names` (providers differ in spelling)."""
        for name in names:
            value = self._items.get(name.lower())
            if value is not None and value.strip():
                return value.strip()
        return None


def load_json(body: bytes) -> Any:
    """Decode a reply body, or return `None` when it is not JSON at all (a truncated body)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


#: Control characters a provider's text may carry (an ANSI escape such as ESC [2K): a
#: failure's detail is printed on a terminal, where they would recolour or erase lines. With
#: them the invisible format characters that reorder or hide text (bidirectional overrides
#: and isolates, zero-width characters, the byte-order mark): a tester's 400 with U+202E
#: printed the rest of its `lane stopped` line reversed.
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def short(text: str, limit: int = DETAIL_LIMIT) -> str:
    """Trim provider text for `Failure.detail`: one line (long HTML error pages would bloat
    the ledger), with no control characters (a tester's 400 carried ESC [31m to the console,
    `status`, `audit` and report.md)."""
    text = _CONTROLS.sub("", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + CUT_MARK


#: An HTML page, told by its start: a web server's or a gateway's error page.
_HTML_START = re.compile(r"\s*<(!doctype\s+html|html[\s>])", re.IGNORECASE)
#: How much of a page is read for its excerpt: an error page's words come early, and a
#: gateway's page with its styles inline fits; the rest is never shown.
_HTML_READ = 1 << 16
#: What a page shows no reader: its head (the title repeats the heading), scripts, styles
#: and comments, each up to its close.
_HTML_UNSEEN = re.compile(r"<(head|script|style)[\s>]|<!--", re.IGNORECASE)
#: Where each of those ends.
_HTML_CLOSE = {
    # A head may be left unclosed (HTML allows it): its body's start ends it too.
    "head": re.compile(r"</head\s*>|(?=<body[\s>])", re.IGNORECASE),
    **{tag: re.compile(rf"</{tag}\s*>", re.IGNORECASE) for tag in ("script", "style")},
}
_HTML_COMMENT_CLOSE = re.compile("-->")
#: A tag; `[^<>]` so that a run of unclosed `<` costs one pass, not its length squared.
_HTML_TAG = re.compile(r"<[^<>]*>")


def _page_text(page: str) -> str:
    """The words an HTML page shows, by pattern (nothing in it is run), in one pass."""
    shown: list[str] = []
    at = 0
    while (hidden := _HTML_UNSEEN.search(page, at)) is not None:
        shown.append(page[at : hidden.start()])
        tag = hidden[1]
        closer = _HTML_CLOSE[tag.lower()] if tag else _HTML_COMMENT_CLOSE
        close = closer.search(page, hidden.end())
        at = len(page) if close is None else close.end()  # never closed: nothing after shows
    shown.append(page[at:])
    return html.unescape(_HTML_TAG.sub(" ", "".join(shown)))


def body_excerpt(body: bytes, limit: int = DETAIL_LIMIT) -> str:
    """A printable excerpt of a raw body for failure details. An HTML page is given as its
    text: a static server's 501 page filled a whole detail with markup before its words
    ("Unsupported method ('POST')")."""
    text = body.decode("utf-8", errors="replace")
    if _HTML_START.match(text):
        # A page whose words all lie in what is not shown (a script never closed, styles
        # past the cut) is given as written: markup, not an empty detail.
        page = text[:_HTML_READ]
        text = _page_text(page).strip() or page
    return short(text, limit)


#: The largest count taken as one (a trillion: no reply holds that many tokens, no batch file
#: that many bytes). Far below Int64's limit, so the ledger's sums of millions of them (the
#: audit's token totals) cannot wrap either.
COUNT_LIMIT = 10**12


def as_int(value: object) -> int | None:
    """A count (tokens, jobs, bytes, a status code): they arrive as ints, sometimes floats or
    strings. Anything else is unknown, and so is a negative count or one above `COUNT_LIMIT`:
    a reply's `usage` of 1e30 crashed the lane's journal line (orjson writes no integer past
    64 bits), and a negative one lowered the run's token counts."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        # Short and ASCII first: int() of "²" raises, and of 5,000 digits too (its limit).
        digits = text.isascii() and text.isdigit() and len(text) <= len(str(COUNT_LIMIT))
        value = int(text) if digits else None
    if isinstance(value, int) and 0 <= value <= COUNT_LIMIT:
        return value
    return None


def as_float(value: object) -> float | None:
    """A finite number at least 0, or `None`: costs and similar optional fields (a provider's
    negative cost is no cost, and would lower the run's reported total)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if 0 <= number < float("inf") else None  # NaN fails both comparisons
    return None


__all__ = [
    "DETAIL_LIMIT",
    "Adapter",
    "ChatRequest",
    "Completion",
    "Failure",
    "Headers",
    "HttpRequest",
    "as_float",
    "as_int",
    "body_excerpt",
    "load_json",
    "short",
    "with_auth_hint",
]


def with_auth_hint(result: Completion | Failure, hint: str | None) -> Completion | Failure:
    """An auth failure whose detail opens with where the refused credential came from (`hint`,
    say "credential from GROQ_API_KEY"): the lane stops on three of them with this detail,
    and the provider's words ("Invalid API Key") name no variable, least of all with two set.
    It says where the credential came from, not what to fix: a model the account may not use
    (Bedrock's AccessDeniedException, Vertex's PERMISSION_DENIED) is refused with valid keys."""
    if hint is None or not isinstance(result, Failure) or result.outcome is not Outcome.AUTH_ERROR:
        return result
    return replace(result, detail=short(f"{hint}: {result.detail}"))


def status_outcome(
    status: int,
    *,
    rate_limits: Collection[int] = (),
    timeouts: Collection[int] = (),
    provider_errors: Collection[int] = (),
    otherwise: Outcome = Outcome.BAD_REQUEST,
) -> Outcome:
    """What an HTTP status means when the body names no error the adapter knows.

    The common reading (429 rate limit, 408 timeout, 401/403 auth, 5xx provider, other 4xx our
    bad request) is shared by every adapter; each passes only the statuses its provider uses
    differently (Groq's 498, Vertex's 504 deadline, Bedrock's 424) and what a non-error status
    carrying an error means for it (`otherwise`).
    """
    if status == 429 or status in rate_limits:
        return Outcome.RATE_LIMIT
    if status == 408 or status in timeouts:
        return Outcome.TIMEOUT
    if status in (401, 403):
        return Outcome.AUTH_ERROR
    if status >= 500 or status in provider_errors:
        return Outcome.PROVIDER_ERROR
    if 400 <= status < 500:
        return Outcome.BAD_REQUEST
    return otherwise
