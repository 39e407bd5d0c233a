"""Dispatch throughput: the full engine next to a bare aiohttp loop and `AsyncOpenAI`.

The simulator runs in its own process (answering at once: no faults, no rate limit) so the
clients do not share its event loop or CPU accounting. Each client also runs in a fresh
process, one after another, sending the same requests at the same concurrency, so each peak
RSS is its own. The engine goes through everything a campaign does: plan streaming, lanes,
a request bucket (set far above what the machine can reach), answer validation, the ledger
journal (flushed per line) and compaction.

Run: `python -m bench.dispatch [--requests N] [--concurrency C]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = "sim-coherent"
SIM_CODE = (
    "import asyncio\n"
    "from providers.sim.server import serve_forever\n"
    "asyncio.run(serve_forever(0, 'none', on_start=lambda h: print(h.root_url, flush=True)))\n"
)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _prompts(n: int) -> list[tuple[str, str, str, list[str]]]:
    """(request_id, system, user, keys) for `n` single-key questions."""
    system = "You are a careful forecaster. Answer only with the JSON object requested."
    return [
        (
            f"bench-{i:08d}",
            system,
            f'Will asset {i} close up tomorrow? Reply with a JSON object {{"probability": p}}.',
            ["probability"],
        )
        for i in range(n)
    ]


# --------------------------------------------------------------------------- the clients


def chat_bodies(pairs: list[tuple[str, str]]) -> list[bytes]:
    """OpenAI chat bodies for (system, user) pairs, as a bare client would send them."""
    import orjson

    return [
        orjson.dumps(
            {
                "model": MODEL,
                "max_tokens": 64,
                "messages": [{"role": "system", "content": s}, {"role": "user", "content": u}],
            }
        )
        for s, u in pairs
    ]


async def bare_loop(root: str, bodies: list[bytes], concurrency: int) -> float:
    """POST every body to the simulator's chat route from `concurrency` workers; seconds."""
    import asyncio

    import aiohttp

    url = f"{root}/sim/v1/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench-not-a-key"}
    queue = iter(bodies)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def worker() -> None:
            for body in queue:
                async with session.post(url, data=body, headers=headers) as reply:
                    await reply.read()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0


async def _bare(root: str, n: int, concurrency: int) -> float:
    bodies = chat_bodies([(s, u) for _, s, u, _ in _prompts(n)])
    return await bare_loop(root, bodies, concurrency)


async def _openai(root: str, n: int, concurrency: int) -> float:
    import asyncio

    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{root}/sim/v1", api_key="bench-not-a-key", max_retries=0)
    queue = iter(_prompts(n))

    async def worker() -> None:
        for _, system, user, _ in queue:
            await client.chat.completions.create(
                model=MODEL,
                max_tokens=64,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            )

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


async def _engine(root: str, n: int, concurrency: int) -> float:
    import polars as pl

    from engine.dispatch import dispatch
    from providers import openai as openai_provider
    from providers.types import ModelConfig

    with tempfile.TemporaryDirectory(prefix="dutchbook-bench-") as tmp:
        plan = Path(tmp) / "plan.parquet"
        pl.DataFrame(
            {
                "request_id": [r for r, _, _, _ in _prompts(n)],
                "model": MODEL,
                "arm": "bench",
                "unit": "u",
                "events": [["e"]] * n,
                "keys": [k for _, _, _, k in _prompts(n)],
                "pass": 0,
                "seed": list(range(n)),
                "system": [s for _, s, _, _ in _prompts(n)],
                "user": [u for _, _, u, _ in _prompts(n)],
            }
        ).write_parquet(plan)
        config = ModelConfig(
            name=MODEL,
            provider="openai",
            model=MODEL,
            base_url=f"{root}/sim/v1",
            max_tokens=64,
            concurrency=concurrency,
            rpm=10_000_000,
        )
        adapter = openai_provider.create_adapter(config, {})
        t0 = time.perf_counter()
        summary = await dispatch(
            plan, Path(tmp) / "run", {MODEL: config}, {MODEL: adapter}, log_console=None
        )
        elapsed = time.perf_counter() - t0
        if summary.accepted != n:
            raise SystemExit(f"engine accepted {summary.accepted} of {n}: {summary.lines()}")
        return elapsed


KINDS = ("bare", "openai", "engine")
CLIENTS = {"bare": _bare, "openai": _openai, "engine": _engine}
PRELOAD = {
    "bare": ("aiohttp", "orjson"),
    "openai": ("openai",),
    "engine": ("polars", "engine.dispatch", "providers.openai"),
}


def _child(kind: str, root: str, n: int, concurrency: int) -> None:
    """Entry point of one client process: prints one JSON line."""
    import asyncio
    import importlib

    for module in PRELOAD[kind]:  # import costs are not per-request costs
        importlib.import_module(module)
    before = resource.getrusage(resource.RUSAGE_SELF)
    elapsed = asyncio.run(CLIENTS[kind](root, n, concurrency))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = {
        "kind": kind,
        "elapsed_s": elapsed,
        "rate": n / elapsed,
        "cpu_us_per_request": cpu / n * 1e6,
        "peak_rss_mb": _peak_rss_mb(),
    }
    print(json.dumps(result))


# --------------------------------------------------------------------------- the driver


def _start_sim() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SIM_CODE],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    assert proc.stdout is not None
    root = proc.stdout.readline().strip()
    if not root.startswith("http"):
        proc.kill()
        raise SystemExit("simulator did not start")
    return proc, root


def _stop_sim(sim: subprocess.Popen[str]) -> None:
    sim.send_signal(signal.SIGINT)
    try:
        sim.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sim.kill()


def child_json(module: str, args: list[str]) -> dict[str, float]:
    """Run `python -m module args` in a fresh process; its last stdout line, as JSON."""
    out = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_client(kind: str, root: str, n: int, concurrency: int) -> dict[str, float]:
    args = [
        "--child",
        kind,
        "--root",
        root,
        "--requests",
        str(n),
        "--concurrency",
        str(concurrency),
    ]
    return child_json("bench.dispatch", args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child")
    parser.add_argument("--root")
    args = parser.parse_args(argv if argv is not None else [])
    if args.child:
        _child(args.child, args.root, args.requests, args.concurrency)
        return
    sim, root = _start_sim()
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
    try:
        run_client("bare", root, min(500, args.requests), args.concurrency)  # warm-up
        for _ in range(args.rounds):  # interleaved, so load on a shared machine hits all alike
            for kind in KINDS:
                runs[kind].append(run_client(kind, root, args.requests, args.concurrency))
    finally:
        _stop_sim(sim)
    med = {
        k: {f: statistics.median(r[f] for r in runs[k]) for f in runs[k][0] if f != "kind"}
        for k in KINDS
    }
    bare, oai, eng = med["bare"], med["openai"], med["engine"]
    print(
        f"dispatch benchmark: {args.requests} requests, concurrency {args.concurrency}, "
        f"median of {args.rounds} interleaved rounds; simulator in its own process, "
        "each client in a fresh process"
    )
    for kind in KINDS:
        r = med[kind]
        rates = ", ".join(f"{x['rate']:.0f}" for x in runs[kind])
        print(
            f"  {kind:7s} {r['rate']:8.0f} elicitations/s ({rates})   client CPU "
            f"{r['cpu_us_per_request']:5.0f} µs/request   peak RSS {r['peak_rss_mb']:5.0f} MB"
        )
    print(f"  engine / bare aiohttp   = {eng['rate'] / bare['rate']:.2f}  (target >= 0.50)")
    print(f"  engine / AsyncOpenAI    = {eng['rate'] / oai['rate']:.2f}")
    print(f"  AsyncOpenAI / bare      = {oai['rate'] / bare['rate']:.2f}")
    print(
        "  client CPU per request, engine / bare = "
        f"{eng['cpu_us_per_request'] / bare['cpu_us_per_request']:.2f} (the engine's figure "
        "includes validation, the ledger's journal lines and its compaction)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
