"""The local provider simulator: one aiohttp app on 127.0.0.1 speaking every wire format.

Each provider's real paths are mounted under `/<provider>` so an adapter pointed at
`{root}/<provider>` builds exactly the URL it would build for the real service. Every
request walks the same pipeline (auth, body and parameter checks, the simulator's own
rate limit, an injected fault, then a simulated forecaster's answer), and every step is
counted so tests and rehearsals can reconcile what a client saw with what was done.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import signal
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from providers.sim import forecasters
from providers.sim.call import BadRequest, ChatCall, Dialect, Finish, Reply
from providers.sim.credentials import DEFAULT_CREDENTIALS, SimCredentials
from providers.sim.faults import FaultInjector, FaultKind, FaultProfile, parse_faults
from providers.sim.oauth import TokenStore
from providers.sim.ratelimit import WINDOW_S, SlidingWindowLimiter
from providers.sim.wire_openai import (
    AzureDialect,
    DeepInfraDialect,
    GroqDialect,
    OpenAIDialect,
    parse_chat_body,
)

T = TypeVar("T")

HOST = "127.0.0.1"
SIMULATED_HEADER = "x-dutchbook-simulated"

Authenticator = Callable[[web.Request, bytes], None]


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


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


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
        dialect: Dialect,
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
        return await self._respond(request, dialect, call, fault, generated)

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
        self, dialect: Dialect, fault: FaultKind | None, generated: Generated
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
            model_label=f"sim/{generated.personality}",
            request_id=dialect.request_id(),
            routing=fault is not FaultKind.MISSING_ROUTING,
        )

    async def _respond(
        self,
        request: web.Request,
        dialect: Dialect,
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

    # ----- authentication per provider -----------------------------------------------
    def _bearer_auth(self, key: str, missing: str, wrong: str) -> Authenticator:
        def check(request: web.Request, body: bytes) -> None:
            del body
            token = _bearer(request)
            if token is None:
                raise BadRequest(missing, status=401, code="invalid_api_key", kind="auth")
            if not _same(token, key):
                raise BadRequest(wrong, status=401, code="invalid_api_key", kind="auth")

        return check

    def _azure_auth(self, request: web.Request, body: bytes) -> None:
        del body
        key = self.state.credentials.azure_api_key
        given = request.headers.get("api-key") or _bearer(request)
        if not _same(given, key):
            raise BadRequest(
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure "
                "to provide a valid key for an active subscription and use a correct regional "
                "API endpoint for your resource.",
                status=401,
                kind="auth",
            )

    # ----- routes ----------------------------------------------------------------------
    def routes(self) -> list[web.RouteDef]:
        creds = self.state.credentials
        generic = OpenAIDialect("openai")
        sim = OpenAIDialect("sim")
        groq = GroqDialect()
        deepinfra = DeepInfraDialect()
        azure = AzureDialect()
        groq_auth = self._bearer_auth(
            creds.groq_api_key, "Invalid API Key", "Invalid API Key"
        )
        deepinfra_auth = self._bearer_auth(
            creds.deepinfra_api_key, "Missing authorization", "Unauthorized"
        )

        def chat(provider: str) -> Callable[[bytes], ChatCall]:
            return lambda body: parse_chat_body(provider, body)

        async def openai_chat(request: web.Request) -> web.StreamResponse:
            return await self.serve(request, generic, None, chat("openai"), generic.validate)

        async def sim_chat(request: web.Request) -> web.StreamResponse:
            return await self.serve(request, sim, None, chat("sim"), sim.validate)

        async def groq_chat(request: web.Request) -> web.StreamResponse:
            return await self.serve(request, groq, groq_auth, chat("groq"), groq.validate)

        async def deepinfra_chat(request: web.Request) -> web.StreamResponse:
            return await self.serve(
                request, deepinfra, deepinfra_auth, chat("deepinfra"), deepinfra.validate
            )

        async def azure_deployment_chat(request: web.Request) -> web.StreamResponse:
            deployment = request.match_info["deployment"]

            def parse(body: bytes) -> ChatCall:
                if not request.query.get("api-version"):
                    raise BadRequest("Resource not found", status=404, kind="not_found")
                return parse_chat_body("azure", body, model_override=deployment)

            return await self.serve(request, azure, self._azure_auth, parse, azure.validate)

        async def azure_v1_chat(request: web.Request) -> web.StreamResponse:
            return await self.serve(
                request, azure, self._azure_auth, chat("azure"), azure.validate
            )

        routes = [
            web.post("/openai/v1/chat/completions", openai_chat),
            web.post("/sim/v1/chat/completions", sim_chat),
            web.post("/groq/openai/v1/chat/completions", groq_chat),
            web.post("/deepinfra/v1/openai/chat/completions", deepinfra_chat),
            web.post(
                "/azure/openai/deployments/{deployment}/chat/completions", azure_deployment_chat
            ),
            web.post("/azure/openai/v1/chat/completions", azure_v1_chat),
        ]
        routes += self.extra_routes()
        return routes

    def extra_routes(self) -> list[web.RouteDef]:
        """Bedrock, Vertex and the OAuth token endpoint (see `routes_cloud`)."""
        from providers.sim.routes_cloud import cloud_routes  # it needs this class: import late

        return cloud_routes(self)


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


async def _label_simulated(request: web.Request, response: web.StreamResponse) -> None:
    del request
    response.headers[SIMULATED_HEADER] = "true"


def build_app(state: SimState) -> web.Application:
    """The aiohttp application (exposed for tests that want their own runner)."""
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.on_response_prepare.append(_label_simulated)
    app.add_routes(Simulator(state).routes())
    return app


class _LoopThread:
    """A private event loop on a daemon thread: the simulator's own "machine".

    A real provider does not share the client's event loop, and neither should its fake: a
    client that blocks its loop (google-auth refreshing a token synchronously, a long LP)
    would otherwise stall the very server it is waiting for.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="dutchbook-sim", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the simulator's loop and await its result from the caller's."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join, 5.0)
        if not self._thread.is_alive():
            self.loop.close()


class SimHandle:
    """A running simulator: where it listens, what it has counted, how to stop it."""

    def __init__(
        self,
        runner: web.AppRunner,
        state: SimState,
        root_url: str,
        thread: _LoopThread | None = None,
    ) -> None:
        self._runner = runner
        self._thread = thread
        self.state = state
        self.root_url = root_url

    @property
    def port(self) -> int:
        return int(self.root_url.rsplit(":", 1)[1])

    def counts(self) -> dict[str, int]:
        """Requests answered by provider, faults by kind, limiter 429s, tokens issued, ...

        A snapshot (the server may be counting on its own thread meanwhile).
        """
        return dict(self.state.counts.copy())

    async def stop(self) -> None:
        if self._thread is None:
            await self._runner.cleanup()
            return
        await self._thread.run(self._runner.cleanup())
        await self._thread.close()

    async def __aenter__(self) -> SimHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def _listen(state: SimState, port: int) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(
        build_app(state), access_log=None, handle_signals=False, shutdown_timeout=0.5
    )
    await runner.setup()
    site = web.TCPSite(runner, HOST, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, f"http://{HOST}:{bound}"


async def start_sim(
    port: int = 0,
    faults: str | FaultProfile = "none",
    *,
    seed: int = 0,
    rate_limit_rpm: float | None = None,
    rate_limit_tpm: float | None = None,
    credentials: SimCredentials | None = None,
    retry_after_s: float = 1.0,
    rate_limit_window_s: float = WINDOW_S,
    token_ttl_s: float = 3600.0,
    own_thread: bool = True,
) -> SimHandle:
    """Start the simulator on 127.0.0.1 (`port=0`: any free port) and return its handle.

    `faults` is a profile name or `kind=rate,...`; `seed` fixes the fault sequence;
    `rate_limit_rpm` / `rate_limit_tpm` turn on the simulator's own per-model sliding-window
    limits (tokens: prompt plus completion, as the reply will report them);
    `retry_after_s` is the wait hint injected rate-limit faults carry; `token_ttl_s` is
    the lifetime of the OAuth access tokens it issues (short values test refresh).
    The server runs on its own thread and loop unless `own_thread=False`.
    """
    state = SimState(
        faults=FaultInjector(parse_faults(faults), seed),
        credentials=credentials or DEFAULT_CREDENTIALS,
        limiter=(
            SlidingWindowLimiter(rate_limit_rpm, rate_limit_window_s)
            if rate_limit_rpm is not None
            else None
        ),
        retry_after_s=retry_after_s,
        tokens=TokenStore(ttl_s=token_ttl_s),
        token_limiter=(
            SlidingWindowLimiter(rate_limit_tpm, rate_limit_window_s)
            if rate_limit_tpm is not None
            else None
        ),
    )
    if not own_thread:
        runner, root = await _listen(state, port)
        state.root_url = root
        return SimHandle(runner, state, root)
    thread = _LoopThread()
    try:
        runner, root = await thread.run(_listen(state, port))
    except BaseException:
        await thread.close()
        raise
    state.root_url = root
    return SimHandle(runner, state, root, thread)


def _install_stop_signals(stop: asyncio.Event) -> list[signal.Signals]:
    """SIGINT/SIGTERM set `stop` (installed explicitly: a background job may ignore SIGINT)."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    return installed


async def serve_forever(
    port: int,
    faults: str,
    *,
    seed: int = 0,
    rate_limit_rpm: float | None = None,
    rate_limit_tpm: float | None = None,
    retry_after_s: float = 1.0,
    on_start: Callable[[SimHandle], None] | None = None,
    on_stop: Callable[[dict[str, int]], None] | None = None,
    until: Awaitable[None] | None = None,
) -> dict[str, int]:
    """Run until SIGINT/SIGTERM (or until `until` completes); report the final counts.

    Signal handlers are in place before `on_start` announces the server, so a caller that
    signals as soon as it reads the announcement still gets the counts via `on_stop`.
    """
    handle = await start_sim(
        port,
        faults,
        seed=seed,
        rate_limit_rpm=rate_limit_rpm,
        rate_limit_tpm=rate_limit_tpm,
        retry_after_s=retry_after_s,
    )
    stop = asyncio.Event()
    installed = _install_stop_signals(stop) if until is None else []
    try:
        if on_start is not None:
            on_start(handle)
        if until is not None:
            await until
        else:
            await stop.wait()
    finally:
        loop = asyncio.get_running_loop()
        for sig in installed:
            loop.remove_signal_handler(sig)
        counts = handle.counts()
        with contextlib.suppress(Exception):
            await handle.stop()
        if on_stop is not None:
            on_stop(counts)
    return counts
