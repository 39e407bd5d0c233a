"""Memory stays flat as campaigns grow: a resumed 1,000,000-row plan peaks within 20% of a
10,000-row plan doing the same remaining work (2,000 unanswered rows against the simulator).

What differs between the two runs is only what must stream: the plan's length and the
number of accepted answers to skip. Each run is a fresh subprocess whose peak RSS is read
from `resource.getrusage`; the plans and ledgers are built by another subprocess, so neither
measurement carries the cost of making its inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PENDING = 2_000

BUILD = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path
    import polars as pl
    from engine.records import ATTEMPT_SCHEMA, RESPONSE_SCHEMA
    from engine.shards import shard_name

    rows, pending, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True)
    ids = pl.Series("request_id", [f"{i:012d}-{(i * 2654435761) % 2**32:08x}" for i in range(rows)])
    i = pl.int_range(0, rows, eager=True)
    user = pl.lit("Will asset ") + i.cast(pl.String) + pl.lit(
        " close up tomorrow? Reply with a JSON object {\\"probability\\": p}."
    )
    plan = pl.DataFrame({"request_id": ids}).with_columns(
        model=pl.lit("sim-coherent"), arm=pl.lit("mem"), unit=pl.lit("u"),
        events=pl.lit(["e"], dtype=pl.List(pl.String)),
        keys=pl.lit(["probability"], dtype=pl.List(pl.String)),
        **{"pass": pl.lit(0, dtype=pl.Int64)}, seed=i.cast(pl.Int64),
        system=pl.lit("You are a careful forecaster. Answer only with the JSON object."),
        user=user,
    )
    plan.write_parquet(out / "plan.parquet", row_group_size=50_000)
    done = plan.head(rows - pending)
    now = datetime.now(UTC)
    (out / "run" / "responses").mkdir(parents=True)
    (out / "run" / "attempts").mkdir(parents=True)
    done.select(
        "request_id", "model", "arm", "unit", "pass", "events", "keys",
        raw_text=pl.lit('{"probability": 0.5}'),
        values=pl.lit([0.5], dtype=pl.List(pl.Float64)), finish_reason=pl.lit("stop"),
        tokens_in=pl.lit(40, dtype=pl.Int64), tokens_out=pl.lit(8, dtype=pl.Int64),
        attempts=pl.lit(1, dtype=pl.Int64), accepted_at=pl.lit(now),
    ).cast(RESPONSE_SCHEMA).write_parquet(out / "run" / "responses" / shard_name(1))
    done.select(
        "request_id", "model", attempt=pl.lit(1, dtype=pl.Int64), provider=pl.lit("openai"),
        started_at=pl.lit(now), elapsed_ms=pl.lit(3.0), outcome=pl.lit("ok"),
        http_status=pl.lit(200, dtype=pl.Int64), provider_request_id=pl.lit(None, pl.String),
        retry_after_s=pl.lit(None, pl.Float64), tokens_in=pl.lit(40, dtype=pl.Int64),
        tokens_out=pl.lit(8, dtype=pl.Int64), detail=pl.lit(""),
        raw_text=pl.lit('{"probability": 0.5}'), finish_reason=pl.lit("stop"),
    ).select(list(ATTEMPT_SCHEMA)).cast(ATTEMPT_SCHEMA).write_parquet(
        out / "run" / "attempts" / shard_name(1)
    )
    """
)

RUN = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from pathlib import Path
    from engine.dispatch import dispatch
    from providers import openai as openai_provider
    from providers.sim.server import start_sim
    from providers.types import ModelConfig

    out = Path(sys.argv[1])

    async def main():
        async with await start_sim(port=0, faults="none") as sim:
            config = ModelConfig(name="sim-coherent", provider="openai", model="sim-coherent",
                                 base_url=sim.root_url + "/sim/v1", max_tokens=64,
                                 concurrency=32)
            adapter = openai_provider.create_adapter(config, {})
            return await dispatch(out / "plan.parquet", out / "run", {config.name: config},
                                  {config.name: adapter}, log_console=None)

    summary = asyncio.run(main())
    print(json.dumps({
        "accepted": summary.accepted, "already": summary.already_accepted,
        "complete": summary.complete,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))
    """
)


def _python(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _peak(tmp: Path, rows: int) -> dict[str, float]:
    out = tmp / f"plan-{rows}"
    _python(BUILD, str(rows), str(PENDING), str(out))
    result: dict[str, float] = json.loads(_python(RUN, str(out)).strip().splitlines()[-1])
    assert result["complete"] and result["accepted"] == PENDING
    assert result["already"] == rows - PENDING
    return result


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_peak_memory_does_not_grow_with_plan_size(tmp_path: Path) -> None:
    small = _peak(tmp_path, 10_000)
    large = _peak(tmp_path, 1_000_000)
    print(
        f"peak RSS: 10k-row plan {small['peak_mb']:.0f} MB, 1M-row plan {large['peak_mb']:.0f} MB"
    )
    assert large["peak_mb"] <= 1.2 * small["peak_mb"], (small, large)
