"""Engine test helpers: plans written to disk, models pointed at the local simulator.

Every dispatch test talks real HTTP to `providers.sim` (no mock transport), so what is
tested is what a campaign does, minus the provider's bill.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from engine.plan import PLAN_SCHEMA
from engine.records import AttemptRecord, ResponseRecord
from providers import openai as openai_provider
from providers.base import Adapter
from providers.sim.server import SimHandle, start_sim
from providers.types import ModelConfig

SYSTEM = "You are a careful forecaster. Answer only with the JSON object requested."


def plan_rows(
    model: str, n: int, *, grouped_every: int = 3, start: int = 0
) -> list[dict[str, Any]]:
    """`n` plan rows for `model`: single-key questions, and every `grouped_every`-th grouped."""
    rows = []
    for i in range(start, start + n):
        rid = hashlib.sha256(f"{model}|{i}".encode()).hexdigest()[:24]
        if grouped_every and i % grouped_every == 0:
            keys = ["Q01", "Q02"]
            user = (
                f"Q01: asset {i} closes up tomorrow\nQ02: asset {i} closes down tomorrow\n"
                "Reply with a JSON object with keys Q01, Q02."
            )
        else:
            keys = ["probability"]
            user = (
                f'Will asset {i} close up tomorrow? Reply with a JSON object {{"probability": p}}.'
            )
        rows.append(
            {
                "request_id": rid,
                "model": model,
                "arm": "test",
                "unit": f"u{i}",
                "events": [f"e{i}:{k}" for k in keys],
                "keys": keys,
                "pass": 0,
                "seed": i,
                "system": SYSTEM,
                "user": user,
            }
        )
    return rows


def write_plan(path: Path, rows: list[dict[str, Any]]) -> Path:
    pl.DataFrame(rows, schema=PLAN_SCHEMA).write_parquet(path)
    return path


def sim_model(
    name: str, root_url: str, *, route: str = "sim/v1", **limits: Any
) -> tuple[ModelConfig, Adapter]:
    """A model behind the simulator's keyless OpenAI-shaped route, with engine limits."""
    config = ModelConfig(
        name=name,
        provider="openai",
        model=name,
        base_url=f"{root_url}/{route}",
        max_tokens=64,
        timeout_s=limits.pop("timeout_s", 10.0),
        **limits,
    )
    return config, openai_provider.create_adapter(config, {})


#: When hand-written ledger rows start (attempt n starts 10 n seconds later).
T0 = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)


def attempt_row(
    rid: str, n: int, model: str, outcome: str, detail: str = "", *, provider: str = "sim",
    elapsed: float = 5.0,
) -> AttemptRecord:
    """A hand-written attempt (50 tokens in, 5 out) for ledger readers' tests."""
    return AttemptRecord(
        request_id=rid, attempt=n, model=model, provider=provider,
        started_at=T0 + timedelta(seconds=10 * n), elapsed_ms=elapsed, outcome=outcome,
        http_status=None, provider_request_id=None, retry_after_s=None, tokens_in=50,
        tokens_out=5, detail=detail,
    )


def response_row(rid: str, n: int, model: str) -> ResponseRecord:
    """The accepted answer of attempt `n` of `rid`."""
    return ResponseRecord(
        request_id=rid, model=model, arm="baseline", unit="u", pass_=0, events=["e"],
        keys=["probability"], raw_text='{"probability": 0.5}', values=[0.5],
        finish_reason="stop", tokens_in=50, tokens_out=5, attempts=n, accepted_at=T0,
    )


def write_id_plan(run_dir: Path, per_model: dict[str, int]) -> None:
    """A plan of `per_model[m]` requests `m-0`, `m-1`, ... (ids and models only)."""
    rows = [
        {"request_id": f"{model}-{i}", "model": model, "arm": "baseline", "unit": "u"}
        for model, n in per_model.items()
        for i in range(n)
    ]
    pl.DataFrame(rows).write_parquet(run_dir / "plan.parquet")


@pytest.fixture
async def sim() -> AsyncIterator[SimHandle]:
    handle = await start_sim(port=0, faults="none")
    try:
        yield handle
    finally:
        await handle.stop()


class Kit:
    """The helpers above as a fixture (test modules cannot import conftest under importlib)."""

    plan_rows = staticmethod(plan_rows)
    write_plan = staticmethod(write_plan)
    sim_model = staticmethod(sim_model)
    attempt = staticmethod(attempt_row)
    response = staticmethod(response_row)
    id_plan = staticmethod(write_id_plan)
    PLAN_SCHEMA = PLAN_SCHEMA
    T0 = T0


@pytest.fixture
def kit() -> type[Kit]:
    return Kit


#: How polars reported a Parquet write that filled a small tmpfs (a run's last compaction, 4
#: times of 4): not the ENOSPC it met, which it lost, but a failure to write the footer.
LOST_ENOSPC = "parquet: File out of specification: Invalid thrift: transport error"


@pytest.fixture
def polars_loses_enospc(
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[Callable[[Path], bool]], None]:
    """Makes each polars Parquet write to a path the predicate given accepts fail as it did
    on a full tmpfs: part of the file written, then `LOST_ENOSPC`. The disk has no room
    (`os.statvfs`) only while such a half-written `.tmp` file is in the folder asked about,
    as there: once it was removed, 48 KB were free again."""
    real_write, real_statvfs = pl.DataFrame.write_parquet, os.statvfs

    def start(fails_at: Callable[[Path], bool]) -> None:
        def write_parquet(frame: pl.DataFrame, file: Any, *args: Any, **kwargs: Any) -> None:
            if not fails_at(Path(file)):
                return real_write(frame, file, *args, **kwargs)
            Path(file).write_bytes(b"PAR1" + bytes(4096))
            raise pl.exceptions.ComputeError(LOST_ENOSPC)

        def statvfs(path: Any) -> Any:
            folder = Path(path)
            if folder.is_dir() and any(p.name.endswith(".tmp") for p in folder.iterdir()):
                return SimpleNamespace(f_bavail=0, f_frsize=4096)
            return real_statvfs(path)

        monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
        monkeypatch.setattr(os, "statvfs", statvfs)

    return start


#: A request handler for `serve_any`.
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: `serve_any`'s starter: a handler in, the server's root URL out.
ServeAny = Callable[[Handler], Awaitable[str]]


@pytest.fixture
async def serve_any() -> AsyncIterator[ServeAny]:
    """Starts a loopback server answering every method and path with one handler (a server
    that is not a provider, or a provider misbehaving); returns its root URL."""
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


#: How `raw_server` answers: bytes to send once a request's head is read, and whether to
#: reset the connection (RST) rather than close it.
RawReply = tuple[bytes, bool]
RawServe = Callable[[RawReply], Awaitable[str]]
#: A reply head of 10,000 headers, more than aiohttp reads.
MANY_HEADERS = b"".join(b"X-H%d: v\r\n" % i for i in range(10_000))


@pytest.fixture
async def raw_server() -> AsyncIterator[RawServe]:
    """A loopback server answering every request alike, with bytes no HTTP server would
    send (a server answering badly); returns its root URL."""
    servers: list[asyncio.Server] = []

    async def start(reply: RawReply) -> str:
        data, reset = reply

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            if data:
                writer.write(data)
                await writer.drain()
            if reset:
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            else:
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()
