"""The request pipeline every simulated provider shares.

Auth, body and parameter checks, the simulator's own rate limits, one injected fault, then
a simulated forecaster's answer rendered by the provider's dialect. Every step is counted
so tests and rehearsals can reconcile what a client saw with what was done.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from providers.sim import forecasters
from providers.sim.auth import Authenticator
from providers.sim.batch_jobs import BatchStore
from providers.sim.call import BadRequest, ChatCall, Finish, Reply, ServerDialect
from providers.sim.credentials import SimCredentials
from providers.sim.faults import FaultInjector, FaultKind
from providers.sim.oauth import TokenStore
from providers.sim.object_store import CloudJobs, ObjectStore
from providers.sim.ratelimit import SlidingWindowLimiter


@dataclass
class SimState:
    """Everything a running simulator remembers; `counts` is what `SimHandle.counts` reports."""

    faults: FaultInjector
    credentials: SimCredentials
    limiter: SlidingWindowLimiter | None
    retry_after_s: float
    tokens: TokenStore = field(default_factory=TokenStore)
    token_limiter: SlidingWindowLimiter | None = None
    counts: Counter[str] = field(default_factory=Counter)
    root_url: str = ""
    #: The OpenAI-shaped files and batch jobs (issue 13), counted in `counts`.
    batches: BatchStore = field(init=False)

    def __post_init__(self) -> None:
        self.batches = BatchStore(self.counts, self.faults)
    #: S3- and GCS-shaped objects, and the Bedrock and Vertex batch jobs over them.
    store: ObjectStore = field(default_factory=ObjectStore)
    cloud_jobs: CloudJobs = field(default_factory=CloudJobs)


@dataclass(frozen=True)
class Generated:
    """A forecaster's reply before any fault touches it (its size feeds the tpm window)."""

    personality: str
    text: str
    finish: Finish
    tokens_in: int

    @property
    def tokens(self) -> int:
        return self.tokens_in + forecasters.count_tokens(self.text)


def truncate_to_cap(text: str, cap: int | None) -> tuple[str, Finish]:
    """An output-token cap cuts the text (4 characters a token) and says so."""
    if cap is not None and forecasters.count_tokens(text) > cap:
        return text[: cap * 4], Finish.LENGTH
    return text, Finish.STOP


class Simulator:
    """Routes and the shared pipeline; one instance per running server."""

    def __init__(self, state: SimState) -> None:
        self.state = state

    # ----- the shared pipeline -------------------------------------------------------
    async def serve(
        self,
        request: web.Request,
        dialect: ServerDialect,
        authenticate: Authenticator | None,
        parse: Callable[[bytes], ChatCall],
        validate: Callable[[ChatCall], None] | None = None,
    ) -> web.StreamResponse:
        counts = self.state.counts
        counts["requests"] += 1
        counts[f"requests.{dialect.provider}"] += 1
        body = await request.read()
        try:
            if authenticate is not None:
                authenticate(request, body)
        except BadRequest as exc:
            counts["auth_rejected"] += 1
            return dialect.error(exc)
        try:
            call = parse(body)
            if validate is not None:
                validate(call)
        except BadRequest as exc:
            counts["bad_request"] += 1
            return dialect.error(exc)
        generated = self._generate(call)
        wait = self._over_limit(f"{dialect.provider}:{call.model}", generated.tokens)
        if wait is not None:
            return dialect.rate_limited(wait)
        fault = self.state.faults.draw()
        if fault is not None:
            counts[f"fault.{fault.value}"] += 1
            # By provider too: how a fault reads depends on the wire (a refusal on a wire
            # without a refusal signal is the model's text, and fails to parse).
            counts[f"fault_by_provider.{dialect.provider}.{fault.value}"] += 1
        return await self._respond(request, dialect, call, fault, generated)

    def answer_line(
        self,
        dialect: ServerDialect,
        parse: Callable[[bytes], ChatCall],
        validate: Callable[[ChatCall], None] | None,
        body: bytes,
        fault: FaultKind | None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One batch line through the pipeline: parse, validate, a forecaster's answer, the
        line's fault (drawn by the job). No auth (the job's creator had it) and no rate
        limit (batch has its own quota); transport faults have no meaning in a file."""
        try:
            call = parse(body)
            if validate is not None:
                validate(call)
        except BadRequest as exc:
            self.state.counts["bad_request"] += 1
            return _parts(dialect.error(exc))
        generated = self._generate(call)
        if fault is FaultKind.RATE_LIMIT:
            return _parts(dialect.rate_limited(self.state.retry_after_s))
        if fault is FaultKind.RATE_LIMIT_BARE:
            return _parts(dialect.rate_limited(None))
        if fault is FaultKind.SERVER_ERROR:
            return _parts(dialect.server_error())
        return _parts(dialect.success(call, self._reply(dialect, fault, generated)))

    def _generate(self, call: ChatCall) -> Generated:
        """The forecaster's reply, capped by the request's output-token limit."""
        personality = forecasters.personality_for(call.model)
        text = forecasters.answer(call.model, call.system, call.user, call.seed, personality)
        text, finish = truncate_to_cap(text, call.max_tokens)
        tokens_in = forecasters.count_tokens(call.system + call.user)
        return Generated(personality, text, finish, tokens_in)

    def _over_limit(self, key: str, tokens: int) -> float | None:
        """Seconds to wait if the request would break the rpm or tpm window, else None.

        Both windows are checked before either records, so a request refused by one does
        not use up the other.
        """
        rpm, tpm = self.state.limiter, self.state.token_limiter
        waits = [w for w in (rpm.check(key) if rpm else None,
                             tpm.check(key, tokens) if tpm else None) if w is not None]
        if waits:
            self.state.counts["rate_limiter.429"] += 1
            if tpm is not None and tpm.check(key, tokens) is not None:
                self.state.counts["rate_limiter.tpm_429"] += 1
            return max(waits)
        if rpm is not None:
            rpm.record(key)
        if tpm is not None:
            tpm.record(key, tokens)
        return None

    def _reply(
        self, dialect: ServerDialect, fault: FaultKind | None, generated: Generated
    ) -> Reply:
        text, finish = generated.text, generated.finish
        if fault is FaultKind.OUTPUT_CAP:
            text, finish = text[: max(1, len(text) // 3)], Finish.LENGTH
        elif fault is FaultKind.REFUSAL:
            text, finish = "", Finish.REFUSAL
        tokens_out = forecasters.count_tokens(text) if text else 0
        self.state.counts["usage.completion_tokens"] += tokens_out
        return Reply(
            text=text,
            finish=finish,
            tokens_in=generated.tokens_in,
            tokens_out=tokens_out,
            model_label=forecasters.model_label(generated.personality),
            request_id=dialect.request_id(),
            routing=fault is not FaultKind.MISSING_ROUTING,
        )

    async def _respond(
        self,
        request: web.Request,
        dialect: ServerDialect,
        call: ChatCall,
        fault: FaultKind | None,
        generated: Generated,
    ) -> web.StreamResponse:
        if fault is FaultKind.RATE_LIMIT:
            return dialect.rate_limited(self.state.retry_after_s)
        if fault is FaultKind.RATE_LIMIT_BARE:
            return dialect.rate_limited(None)
        if fault is FaultKind.SERVER_ERROR:
            return dialect.server_error()
        if fault is FaultKind.CONNECTION_RESET:
            return await _reset(request)
        if fault is FaultKind.SLOW:
            await asyncio.sleep(self.state.faults.profile.slow_delay_s)
        reply = self._reply(dialect, fault, generated)
        response = dialect.success(call, reply)
        if fault is None:
            self.state.counts[f"answered.{dialect.provider}"] += 1
        if fault is FaultKind.MALFORMED_JSON:
            raw = bytes(response.body) if isinstance(response.body, bytes | bytearray) else b"{}"
            response.body = raw[: max(1, len(raw) // 2)]
        elif fault is FaultKind.TRUNCATED_BODY:
            raw = bytes(response.body) if isinstance(response.body, bytes | bytearray) else b"{}"
            return await _truncated(request, response, raw)
        return response


def _parts(response: web.Response) -> tuple[int, dict[str, str], bytes]:
    body = response.body if isinstance(response.body, bytes | bytearray) else b""
    return response.status, dict(response.headers), bytes(body)


async def _reset(request: web.Request) -> web.StreamResponse:
    """Drop the connection before a single response byte: the client sees a disconnect."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    raise asyncio.CancelledError  # aiohttp treats this as a dropped connection, sends nothing


async def _truncated(
    request: web.Request, template: web.Response, raw: bytes
) -> web.StreamResponse:
    """Promise the whole body in Content-Length, send half, then close the connection."""
    response = web.StreamResponse(status=template.status, headers=template.headers)
    response.content_length = len(raw)
    await response.prepare(request)
    await response.write(raw[: max(1, len(raw) // 2)])
    transport = request.transport
    if transport is not None:
        await asyncio.sleep(0)
        transport.close()
    return response
