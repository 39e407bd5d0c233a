"""What every wire format boils down to once the simulator has read a request.

The server's pipeline (auth, validation, rate limit, faults, answer) is shared by all
providers; each wire module only translates between its JSON and these two types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from aiohttp import web


class Finish(StrEnum):
    """How a simulated generation ended, before each wire names it its own way."""

    STOP = "stop"
    LENGTH = "length"
    REFUSAL = "refusal"


@dataclass(frozen=True)
class ChatCall:
    """One accepted elicitation, whatever wire it arrived on."""

    provider: str
    model: str
    system: str
    user: str
    seed: int | None = None
    max_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """A simulated generation ready to be rendered by a wire module."""

    text: str
    finish: Finish
    tokens_in: int
    tokens_out: int
    model_label: str  # e.g. "sim/noisy": every simulated answer says so
    request_id: str
    routing: bool = True  # False: leave out the id/model a client routes on


class BadRequest(Exception):
    """A request the provider would reject with its own 4xx shape."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        code: str | None = None,
        param: str | None = None,
        kind: str = "bad_request",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.param = param
        self.kind = kind  # "bad_request" | "auth" | "not_found"


class ServerDialect(Protocol):
    """How one provider says things: its errors, its 429s and its successful replies."""

    provider: str

    def request_id(self) -> str: ...

    def error(self, exc: BadRequest) -> web.Response: ...

    def rate_limited(self, retry_after_s: float | None) -> web.Response: ...

    def server_error(self) -> web.Response: ...

    def success(self, call: ChatCall, reply: Reply) -> web.Response: ...


def retry_after_value(seconds: float) -> str:
    """Retry-After as providers send it: whole seconds, or a decimal below one second.

    Real providers send integers; sub-second values exist so tests and rehearsals need not
    sleep whole seconds, and the openai client parses them as floats too.
    """
    if seconds >= 1.0:
        return str(int(-(-seconds // 1)))
    return f"{max(seconds, 0.0):g}"
