"""Compaction runs in a thread of low priority; nothing else is lowered."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from engine.dispatch import dispatch
from engine.housekeeping import HOUSEKEEPING_NICE, housekeeping_thread, yield_cpu
from engine.ledger import Ledger
from engine.retry import RetryPolicy
from engine.scan import scan_responses
from providers.sim.server import SimHandle

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread priority is Linux's")


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_housekeeping_thread_is_lowered_and_its_caller_is_not() -> None:
    before = _priority()
    pool = housekeeping_thread("test-housekeeping")
    try:
        assert pool.submit(_priority).result() == HOUSEKEEPING_NICE
    finally:
        pool.shutdown()
    assert _priority() == before


def test_yield_cpu_never_raises_a_priority() -> None:
    seen: list[int] = []

    def body() -> None:
        yield_cpu(HOUSEKEEPING_NICE)
        yield_cpu(5)  # asked for a higher priority than it has: keeps its own
        seen.append(_priority())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [HOUSEKEEPING_NICE]


async def test_dispatch_folds_in_a_lowered_thread_and_loses_nothing(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fold during dispatch runs at the housekeeping priority; the event loop's thread keeps
    its own, and every answer is in the shards once the ledger is closed."""
    folds: list[tuple[int, bool]] = []
    compact = Ledger.compact

    def recorded(self: Ledger) -> int:
        folds.append((_priority(), threading.current_thread() is threading.main_thread()))
        return compact(self)

    monkeypatch.setattr(Ledger, "compact", recorded)
    rows = kit.plan_rows("sim-a", 60)
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    # Paced at 40 requests a second, so the 60 answers span many of the compactor's checks.
    config, adapter = kit.sim_model("sim-a", sim.root_url, concurrency=2, rpm=2400)
    before = _priority()
    summary = await dispatch(
        plan, tmp_path / "run", {"sim-a": config}, {"sim-a": adapter},
        policy=RetryPolicy(max_attempts=2, base_s=0.01, cap_s=0.02), log_console=None,
        compact_every_n=5, compact_every_s=0.05,
    )
    assert summary.complete and summary.accepted == 60 and summary.compactions > 0
    in_dispatch = [nice for nice, on_main in folds if not on_main]
    assert len(in_dispatch) == summary.compactions
    assert set(in_dispatch) == {HOUSEKEEPING_NICE}
    # The opening and closing compactions run in the caller's thread, unlowered.
    assert [nice for nice, on_main in folds if on_main] == [before, before]
    assert _priority() == before
    assert sorted(scan_responses(tmp_path / "run").collect()["request_id"].to_list()) == sorted(
        row["request_id"] for row in rows
    )
