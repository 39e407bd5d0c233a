"""A new run renders its prompts once: the plan is written while the estimate renders them
(issue 12), with the ids, seeds and files planning always gave."""

from __future__ import annotations

import asyncio
import errno
import io
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from rich.console import Console

import engine.dispatch
import runs.pipeline as pipeline
import runs.planner as planner
from engine.durable import is_disk_full
from panels.arms import Query
from runs.pipeline import run_campaign
from runs.planner import (
    PlanWriter,
    _digest,
    content_digest,
    estimate,
    render_seed,
    request_id,
    request_seed,
    write_plan,
)
from runs.spec import load_spec
from runs.units import UnitSource

SPEC = (
    'name = "once"\nseed = 3\n[data]\nstock_days = 2\n'
    '[[models]]\nname = "a"\nprovider = "sim"\nmodel = "sim-coherent"\n'
    '[[models]]\nname = "b"\nprovider = "sim"\nmodel = "sim-noisy"\n'
    '[[arms]]\nname = "baseline"\npasses = 2\n'
    # linked and dispersed share queries with two-asset and horizon/2: rows planned once
    '[[arms]]\nname = "two-asset"\nmodels = ["a"]\n'
    '[[arms]]\nname = "linked"\nmodels = ["a"]\n'
    '[[arms]]\nname = "families/isolated"\nmodels = ["b"]\n'
)


def test_ids_and_seeds_are_those_planned_before() -> None:
    """A resume finds its answers by these ids: the values planned before the f-string
    spelling, and `_digest` of the same parts."""
    q = Query(events=("e1", "e2"), keys=("p_a", "p_b"), system="You forecast.\nÉté",
              user="Will A rise?\x1f 2")  # fmt: skip
    digest = content_digest(q)
    assert digest == "54f116052595f04565e119a77c923a290357da00995a69d424ad17c455c859ea"
    assert digest == _digest(q.system, q.user, "p_a,p_b").hex()
    assert request_id("paper", "gpt-oss-120b", 3, q) == "b890ffa7d0ddea5e5c35d30d"
    assert request_id("c", "m", 0, q) == _digest("c", "m", 0, digest).hex()[:24]
    assert request_seed(12345, 3, q) == 699853475
    assert request_seed(9, 1, q) == int.from_bytes(_digest(9, 1, digest)[:4], "big") & 0x7FFFFFFF
    assert render_seed(7, "baseline", "2025-01-02:AAA", 1) == 2110970288


def test_a_plan_written_while_estimating_is_the_plan(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    spec = load_spec(spec_path)
    units = UnitSource.from_spec(spec)
    write_plan(spec, tmp_path / "alone", units)
    writer = PlanWriter(tmp_path / "staging")
    lines = estimate(spec, units, plan=writer)
    assert lines == estimate(spec, units)
    writer.commit(tmp_path / "together")
    for name in ("plan.parquet", "plan_members.parquet"):
        alone = pl.read_parquet(tmp_path / "alone" / name)
        assert_frame_equal(pl.read_parquet(tmp_path / "together" / name), alone)
    plan = pl.read_parquet(tmp_path / "together" / "plan.parquet")
    members = pl.read_parquet(tmp_path / "together" / "plan_members.parquet")
    assert plan["request_id"].n_unique() == plan.height < members.height  # shared queries
    assert plan.height == sum(line.queries for line in lines)
    assert [p.name for p in (tmp_path / "staging").iterdir()] == []  # parts merged and gone


def test_a_part_that_cannot_be_written_stops_the_estimate_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts are written by the writer's thread while the next batch renders: a write that
    fails there (a full disk) is raised in the estimate, not lost with the thread, and the
    writer then stops without leaving its thread behind."""
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    spec = load_spec(spec_path)
    monkeypatch.setattr(planner, "BATCH_ROWS", 40)
    write = planner._PartWriter.write
    written: list[str] = []

    def second_batch_fails(self: Any, frame: pl.DataFrame) -> None:
        if len(written) == 2:  # the first batch's two parts went through
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(self.folder.name)
        write(self, frame)

    monkeypatch.setattr(planner._PartWriter, "write", second_batch_fails)
    writer = PlanWriter(tmp_path / "staging")
    with pytest.raises(OSError) as raised:
        estimate(spec, UnitSource.from_spec(spec), plan=writer)
    assert raised.value.errno == errno.ENOSPC
    assert written == [".member-parts", ".plan-parts"]
    writer.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("dutchbook-plan")]


def test_a_plan_file_the_disk_cuts_short_leaves_no_temporary_in_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full run folder kept `plan_members.parquet.tmp` (or `plan.parquet.tmp`), taking the
    # room the user frees to run again.
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    run_dir = tmp_path / "run"
    sink = pl.LazyFrame.sink_parquet

    def fills_the_run_folder(frame: pl.LazyFrame, path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).parent != run_dir:
            return sink(frame, path, *args, **kwargs)
        Path(path).write_bytes(b"PAR1" + bytes(4096))
        raise pl.exceptions.ComputeError(
            "parquet: File out of specification: underlying IO error: No space left on device "
            "(os error 28)"
        )

    monkeypatch.setattr(pl.LazyFrame, "sink_parquet", fills_the_run_folder)
    with pytest.raises(Exception) as raised:
        write_plan(load_spec(spec_path), run_dir)
    assert is_disk_full(raised.value)
    # Nor are its parts, staged in the run folder itself by `write_plan` (they were).
    assert sorted(p.name for p in run_dir.iterdir()) == []


def test_a_new_run_renders_its_prompts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate's pass writes the plan (staged outside the folder until its lock is held);
    a resume renders nothing; the staged parts are gone after the run."""
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    passes: list[str] = []
    iter_queries = planner.iter_queries

    def counted(spec: Any, units: Any) -> Any:
        passes.append(spec.name)
        return iter_queries(spec, units)

    monkeypatch.setattr(planner, "iter_queries", counted)
    staging_root = tmp_path / "tmp"
    staging_root.mkdir()
    monkeypatch.setenv("TMPDIR", str(staging_root))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    out = tmp_path / "run"

    def run() -> None:
        result = asyncio.run(run_campaign(spec_path, out, progress=False,
                                          console=Console(file=io.StringIO())))  # fmt: skip
        assert result.summary is not None and result.summary.complete

    run()
    assert passes == ["once"]
    assert list(staging_root.iterdir()) == []
    spec = load_spec(spec_path)
    write_plan(spec, tmp_path / "alone", UnitSource.from_spec(spec))
    for name in ("plan.parquet", "plan_members.parquet"):
        assert_frame_equal(pl.read_parquet(out / name), pl.read_parquet(tmp_path / "alone" / name))
    passes.clear()
    run()  # a resume: the saved estimate, the plan on disk
    assert passes == []


def test_an_arm_that_cannot_be_rendered_cannot_be_planned_while_estimating(
    tmp_path: Path,
) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(
        'name = "h"\n[data]\nstock_days = 2\n[[models]]\nname = "a"\nprovider = "sim"\n'
        'model = "sim-coherent"\n[[arms]]\nname = "headline"\n',
        encoding="utf-8",
    )
    spec = load_spec(spec_path)
    units = UnitSource.from_spec(spec)
    assert estimate(spec, units)[0].approximate  # no headlines: estimated from a proxy
    with pytest.raises(ValueError, match="headline"):
        estimate(spec, units, plan=PlanWriter(tmp_path / "staging"))


def test_the_staged_plan_folder_is_gone_before_dispatch_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staged parts' temporary folder lives from the estimate to the plan's commit only:
    a run killed during dispatch (SIGKILL runs no clean-up) leaves nothing behind in it."""
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC, encoding="utf-8")
    staging_root = tmp_path / "tmp"
    staging_root.mkdir()
    monkeypatch.setenv("TMPDIR", str(staging_root))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    seen: dict[str, list[str]] = {}
    estimate_before = estimate  # what runs.pipeline imported and calls
    dispatch_before = engine.dispatch.dispatch

    def estimating(*args: Any, **kwargs: Any) -> Any:
        lines = estimate_before(*args, **kwargs)
        seen["estimated"] = sorted(p.name[:15] for p in staging_root.glob("dutchbook-plan-*"))
        return lines

    async def dispatching(*args: Any, **kwargs: Any) -> Any:
        seen["dispatch"] = sorted(p.name for p in staging_root.glob("dutchbook-plan-*"))
        return await dispatch_before(*args, **kwargs)

    monkeypatch.setattr(pipeline, "estimate", estimating)
    monkeypatch.setattr(pipeline, "dispatch", dispatching)
    result = asyncio.run(run_campaign(spec_path, tmp_path / "run", progress=False,
                                      console=Console(file=io.StringIO())))  # fmt: skip
    assert result.summary is not None and result.summary.complete
    assert seen == {"estimated": ["dutchbook-plan-"], "dispatch": []}


def test_queries_before_sharing_count_every_arms_view_unrendered(tmp_path: Path) -> None:
    """The figure workers' size check: exactly the plan's members (one row per arm's view of
    a query, shared ones counted per arm), an upper bound of its rows."""
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    units = UnitSource.from_spec(spec)
    write_plan(spec, tmp_path / "run", units)
    members = pl.read_parquet(tmp_path / "run" / "plan_members.parquet").height
    rows = pl.read_parquet(tmp_path / "run" / "plan.parquet").height
    assert rows < members  # the spec shares queries between arms
    assert planner.queries_before_sharing(spec, units) == members
    # what a resume counts instead, from the estimate saved with the plan
    assert pipeline._queries_asked(spec, units, estimate(spec, units)) == members


def test_a_units_repeated_questions_are_hashed_once_with_the_same_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pass of an isolated family asks its statements word for word: the digest is
    hashed once per distinct question of a unit, and each query's id and seed are those of
    hashing it afresh."""
    (tmp_path / "spec.toml").write_text(SPEC.replace("passes = 2", "passes = 3"), "utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    hashed: list[Query] = []

    def counting(query: Query) -> str:
        hashed.append(query)
        return content_digest(query)

    monkeypatch.setattr(planner, "content_digest", counting)
    planned = list(planner.iter_queries(spec, UnitSource.from_spec(spec)))
    per_unit = {(pq.arm, pq.unit, pq.query.system, pq.query.user, pq.query.keys) for pq in planned}
    assert len(hashed) == len(per_unit) < len(planned)
    for pq in planned:
        assert pq.request_id == request_id(spec.name, pq.model.name, pq.pass_index, pq.query)
        assert pq.seed == request_seed(spec.seed, pq.pass_index, pq.query)
