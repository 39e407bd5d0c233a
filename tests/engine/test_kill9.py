"""kill -9 the dispatcher at random moments (one of them inside compaction), resume each
time, and check the ledger: every planned query answered exactly once, no answer paid for
twice, lost attempts recorded as interrupted, and the attempts table reconciled with the
requests the simulator itself counted."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest

from engine.scan import scan_attempts, scan_responses
from providers.sim.server import start_sim

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from engine.dispatch import dispatch
    from engine.retry import RetryPolicy
    from providers import openai as openai_provider
    from providers.types import ModelConfig

    plan, run_dir, root = sys.argv[1], sys.argv[2], sys.argv[3]
    configs, adapters = {}, {}
    for name in ("sim-coherent", "sim-noisy"):
        config = ModelConfig(name=name, provider="openai", model=name,
                             base_url=root + "/sim/v1", max_tokens=64, timeout_s=2.0,
                             concurrency=4, rpm=3000)
        configs[name] = config
        adapters[name] = openai_provider.create_adapter(config, {})
    policy = RetryPolicy(max_attempts=20, base_s=0.01, cap_s=0.05, max_retry_after_s=0.05,
                         max_answer_failures=8)  # 3 (the default): about 2e-4 of runs incomplete
    summary = asyncio.run(dispatch(plan, run_dir, configs, adapters, policy=policy,
                                   compact_every_n=25, compact_every_s=0.3, log_console=None))
    print("\\n".join(summary.lines()))
    sys.exit(0 if summary.complete else 3)
    """
)


def _segments(run_dir: Path) -> int:
    journal = run_dir / "journal"
    return len(list(journal.glob("seg-*.jsonl"))) if journal.exists() else 0


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_kill9_at_random_moments_loses_and_duplicates_nothing(
    tmp_path: Path, kit: type[Kit]
) -> None:
    rng = random.Random(20261130)
    rows = kit.plan_rows("sim-coherent", 150) + kit.plan_rows("sim-noisy", 150)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    run_dir = tmp_path / "run"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, DUTCHBOOK_TEST_COMPACT_PAUSE_S="0.03", PYTHONPATH=os.getcwd())
    kills: list[str] = []
    async with await start_sim(port=0, faults="flaky", seed=3, retry_after_s=0.01) as sim:

        def sent() -> int:
            return sim.counts().get("requests", 0)

        async def run(kill_mode: str | None) -> int | None:
            log = (tmp_path / f"child-{len(kills)}.log").open("w")
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                str(script),
                str(plan),
                str(run_dir),
                sim.root_url,
                env=env,
                stdout=log,
                stderr=log,
            )
            if kill_mode is None:
                return await child.wait()
            start = sent()
            target = start + rng.randint(5, 35)
            while child.returncode is None:
                if kill_mode == "compaction":
                    hit = sent() > start and _segments(run_dir) >= 2
                else:
                    hit = sent() >= target
                if hit:
                    child.send_signal(signal.SIGKILL)
                    await child.wait()
                    kills.append(kill_mode)
                    return None
                await asyncio.sleep(0.002)
            return child.returncode  # finished before the kill moment came

        for mode in ("random", "random", "compaction", "random", "random", "compaction", "random"):
            await run(mode)
        rc = await run(None)
        counts = sim.counts()

    assert kills.count("compaction") >= 1 and len(kills) >= 5, kills
    assert rc == 0, (tmp_path / f"child-{len(kills)}.log").read_text()

    attempts = scan_attempts(run_dir).collect()
    responses = scan_responses(run_dir).collect()
    planned = {r["request_id"] for r in rows}
    # every planned query has exactly one accepted answer
    assert responses.height == len(planned)
    assert set(responses["request_id"]) == planned
    # no accepted answer paid for twice: at most one ok attempt per request, and it is the one
    oks = attempts.filter(pl.col("outcome") == "ok")
    assert oks["request_id"].n_unique() == oks.height == len(planned)
    joined = responses.join(oks.select("request_id", "attempt"), on="request_id")
    assert (joined["attempts"] == joined["attempt"]).all()
    # attempt numbers continue across resumes: no (request, attempt) pair names two
    # different attempts in the shards (identical copies from a re-done fold are deduped)
    raw = pl.concat([pl.read_parquet(p) for p in sorted((run_dir / "attempts").glob("part-*"))])
    distinct = raw.select("request_id", "attempt", "outcome", "started_at").unique()
    assert distinct.group_by("request_id", "attempt").len()["len"].max() == 1
    # interrupted attempts were recorded, and the simulator reconciles
    interrupted = attempts.filter(pl.col("outcome") == "interrupted").height
    finished = attempts.height - interrupted
    assert interrupted >= 1
    assert finished <= counts["requests"] <= finished + interrupted
    answered = counts.get("answered.sim", 0)
    timeouts = attempts.filter(pl.col("outcome") == "timeout").height
    assert oks.height <= answered <= oks.height + interrupted + timeouts
    # a finished run leaves nothing in the journal
    assert all(p.stat().st_size == 0 for p in (run_dir / "journal").glob("seg-*.jsonl"))
