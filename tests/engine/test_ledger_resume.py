"""Resume through the whole engine: plan minus accepted, decided by the ledger's shards and
journal (no in-memory copy of the campaign's ids), against the local simulator."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.dispatch import dispatch
from engine.retry import RetryPolicy
from engine.scan import scan_attempts, scan_responses
from providers.sim.server import SimHandle

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

FAST = RetryPolicy(max_attempts=4, base_s=0.01, cap_s=0.05, max_retry_after_s=0.05)


async def test_resume_asks_only_what_earlier_runs_left(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    rows = kit.plan_rows("sim-a", 50)
    first = kit.write_plan(tmp_path / "first.parquet", rows[:30])
    grown = kit.write_plan(tmp_path / "grown.parquet", rows)  # the same campaign, extended
    config, adapter = kit.sim_model("sim-a", sim.root_url)
    run = tmp_path / "run"
    done = await dispatch(
        first,
        run,
        {"sim-a": config},
        {"sim-a": adapter},
        policy=FAST,
        log_console=None,
        batch_rows=7,
        compact_every_n=9,
    )
    assert done.complete and done.accepted == 30
    before = sim.counts().get("requests", 0)
    again = await dispatch(
        grown,
        run,
        {"sim-a": config},
        {"sim-a": adapter},
        policy=FAST,
        log_console=None,
        batch_rows=7,
        compact_every_n=9,
    )
    assert again.complete and again.already_accepted == 30 and again.accepted == 20
    assert sim.counts().get("requests", 0) - before == 20
    responses = scan_responses(run).collect()
    assert sorted(responses["request_id"].to_list()) == sorted(r["request_id"] for r in rows)
    assert scan_attempts(run).collect().height == 50


async def test_a_row_accepted_earlier_in_this_run_is_skipped_on_a_later_slice(
    tmp_path: Path, kit: type[Kit], sim: SimHandle
) -> None:
    """The plan repeats row 0 as row 100: by the time the feeder reads row 100's slice, the
    first copy was accepted in this run (journal, or a shard after a compaction); it must be
    skipped, not paid for twice. One worker and a queue of 18 make "by the time" certain."""
    rows = kit.plan_rows("sim-a", 120)
    rows[100] = dict(rows[0])
    # By then the first copy is folded into a shard / still only in the journal.
    for compact_every_n, compact_every_s in ((5, 0.05), (10_000, 3600.0)):
        plan = kit.write_plan(tmp_path / f"plan-{compact_every_n}.parquet", rows)
        config, adapter = kit.sim_model("sim-a", sim.root_url, concurrency=1)
        before = sim.counts().get("requests", 0)
        summary = await dispatch(
            plan,
            tmp_path / f"run-{compact_every_n}",
            {"sim-a": config},
            {"sim-a": adapter},
            policy=FAST,
            log_console=None,
            batch_rows=4,
            compact_every_n=compact_every_n,
            compact_every_s=compact_every_s,
        )
        assert summary.complete and summary.accepted == 119 and summary.already_accepted == 1
        assert summary.attempts == 119
        assert (summary.compactions > 0) == (compact_every_n == 5)
        assert sim.counts().get("requests", 0) - before == 119


async def test_each_lane_reads_only_the_stretch_of_the_plan_holding_its_rows(
    tmp_path: Path, kit: type[Kit], sim: SimHandle, monkeypatch: Any
) -> None:
    """A plan sorted by model: the lane of the model at the end starts reading at its first
    row (not at row 0), and a model whose rows are interleaved is still asked in full."""
    import engine.dispatch as dispatch_module
    from engine.plan import plan_spans, read_pending

    rows = kit.plan_rows("sim-a", 30) + kit.plan_rows("sim-b", 10)
    rows.insert(3, kit.plan_rows("sim-c", 2)[0])
    rows.append(kit.plan_rows("sim-c", 2)[1])
    plan = kit.write_plan(tmp_path / "plan.parquet", rows)
    assert plan_spans(plan) == {"sim-a": (0, 31), "sim-c": (3, 42), "sim-b": (31, 41)}
    offsets: dict[str, list[int]] = {}

    def spy(path: Path, offset: int, n: int, model: str, *rest: Any) -> Any:
        offsets.setdefault(model, []).append(offset)
        return read_pending(path, offset, n, model, *rest)

    monkeypatch.setattr(dispatch_module, "read_pending", spy)
    models = {m: kit.sim_model(m, sim.root_url) for m in ("sim-a", "sim-b", "sim-c")}
    summary = await dispatch(
        plan, tmp_path / "run", {m: c for m, (c, _) in models.items()},
        {m: a for m, (_, a) in models.items()}, policy=FAST, log_console=None, batch_rows=8,
    )  # fmt: skip
    assert summary.complete and summary.accepted == 42
    assert offsets["sim-b"] == [31, 39]
    assert offsets["sim-a"] == [0, 8, 16, 24]
    assert offsets["sim-c"] == [3, 11, 19, 27, 35]
