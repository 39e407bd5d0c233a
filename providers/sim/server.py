"""The local provider simulator: one aiohttp app on 127.0.0.1 speaking every wire format.

Each provider's real paths are mounted under `/<provider>` so an adapter pointed at
`{root}/<provider>` builds exactly the URL it would build for the real service (routes in
`routes_openai` and `routes_cloud`, the shared request pipeline in `pipeline`). This module
starts and stops the server, on its own thread, and runs it standalone for `serve-sim`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from aiohttp import web

from providers.sim.credentials import DEFAULT_CREDENTIALS, SimCredentials
from providers.sim.faults import FaultInjector, FaultProfile, parse_faults
from providers.sim.oauth import TokenStore
from providers.sim.pipeline import SimState, Simulator
from providers.sim.ratelimit import WINDOW_S, SlidingWindowLimiter
from providers.sim.routes_batch import batch_routes
from providers.sim.routes_bedrock_batch import bedrock_batch_routes
from providers.sim.routes_cloud import cloud_routes
from providers.sim.routes_openai import openai_routes
from providers.sim.routes_vertex_batch import vertex_batch_routes

T = TypeVar("T")

HOST = "127.0.0.1"
SIMULATED_HEADER = "x-dutchbook-simulated"


async def _label_simulated(request: web.Request, response: web.StreamResponse) -> None:
    del request
    response.headers[SIMULATED_HEADER] = "true"


def build_app(state: SimState) -> web.Application:
    """The aiohttp application (exposed for tests that want their own runner)."""
    # Batch input files may be up to 200 MB (the documented limit the simulator enforces).
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.on_response_prepare.append(_label_simulated)
    sim = Simulator(state)
    # The route table lives here, not in the pipeline, so the pipeline and the routes that
    # call it import one way (routes -> pipeline).
    app.add_routes(openai_routes(sim) + cloud_routes(sim) + batch_routes(sim)
                   + bedrock_batch_routes(sim) + vertex_batch_routes(sim))
    app.add_routes([web.get(COUNTS_PATH, _live_counts(state))])
    return app


#: The counts while the server runs (a kill-test helper watches
#: `batch.input_files_without_batch` to find the window between upload and create).
COUNTS_PATH = "/_sim/counts"
MAX_BODY_BYTES = 210 * 1024 * 1024


def read_live_counts(root_url: str, timeout_s: float = 5.0) -> dict[str, int] | None:
    """A running simulator's counts, read from its counts route at `root_url` (blocking;
    the simulator listens on this machine only); None when what answers there is not the
    simulator (no `SIMULATED_HEADER`). Nothing answering raises `urllib.error.URLError` or
    `OSError`, for the caller to word."""
    import urllib.error
    import urllib.request

    import orjson

    try:
        with urllib.request.urlopen(root_url.rstrip("/") + COUNTS_PATH, timeout=timeout_s) as reply:
            if reply.headers.get(SIMULATED_HEADER) != "true":
                return None
            counts: dict[str, int] = orjson.loads(reply.read())
            return counts
    except urllib.error.HTTPError:  # something answers, refusing the route: not the simulator
        return None


def _live_counts(state: SimState) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def counts(request: web.Request) -> web.Response:
        del request
        return web.json_response(dict(sorted(state.counts.items())))

    return counts


#: How long closing the simulator's loop waits for its cancelled tasks to finish.
CLOSE_WAIT_S = 5.0


async def _cancel_the_others() -> None:
    """Cancel every other task of the running loop and wait until each has finished."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


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
        # What is still running there (a start that a Ctrl-C cut short) is cancelled and
        # let finish first: a loop stopped under a pending task printed "Task was destroyed
        # but it is pending!" and "coroutine ... was never awaited" at exit.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.run(_cancel_the_others()), CLOSE_WAIT_S)
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
