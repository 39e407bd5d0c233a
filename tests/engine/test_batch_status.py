"""`status` and the audit of a batch run stopped with its jobs still at the provider: a
tester's read "not started", "every attempt was accepted (0 of 28 requests attempted so
far)" and "running the same command again asks only the unanswered requests", where a
resume collects the jobs and asks none of their queries again."""

from __future__ import annotations

from collections import Counter
from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest
from rich.console import Console

from engine import batch_lane
from engine.audit import audit
from engine.dispatch import dispatch
from engine.retry import RetryPolicy
from engine.scan import scan_attempts
from engine.settle import settle
from engine.status import status
from providers.types import ModelConfig
from runs.commands.status import render
from tests.engine.batch_fake import FakeBatch, Killed

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
AT_PROVIDER = "2 batch jobs (60 queries) still at the provider"


def held(jobs: int, queries: int) -> dict[str, int]:
    """`batch_at_provider` of jobs a provider holds, every one created (none a simulator's)."""
    return {"jobs": jobs, "queries": queries, "uncreated_jobs": 0, "simulator_jobs": 0,
            "uncreated_queries": 0, "uncreated_simulator_jobs": 0}


async def _run(plan: Path, run_dir: Path, fake: FakeBatch) -> None:
    await dispatch(
        plan, run_dir, {MODEL: ModelConfig(name=MODEL, provider="sim", model="m",
                                           dispatch="batch")},
        {}, batch_clients={MODEL: fake}, policy=RetryPolicy(max_attempts=3, base_s=0.001),
        batch_poll_s=0.001, log_console=None,
    )


async def test_jobs_at_the_provider_are_said_not_started_nowhere(
    tmp_path: Path, kit: type[Kit]
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plan = kit.write_plan(run_dir / "plan.parquet", kit.plan_rows(MODEL, 60))
    # Killed at the first poll once both jobs are created, none collected: a kill at poll 1
    # missed job 2 when its upload was slow (a loaded machine), and job 1 could finish.
    fake = FakeBatch(polls_to_finish=1000)
    fake.kill_if = lambda method: method == "poll" and len(fake.jobs) == 2
    await _run(plan, run_dir, fake)
    summary = status(run_dir)
    assert (summary["state"], summary["attempts"]) == ("stopped", 0)
    assert summary["batch_at_provider"] == held(2, 60)
    out = StringIO()
    render(summary, Console(file=out, width=300))
    text = out.getvalue()
    assert text.splitlines()[0] == f"{run_dir}: stopped, {AT_PROVIDER}"
    said = f"No attempts recorded yet (0 of 60 requests attempted); {AT_PROVIDER}."
    assert summary["sentence"] == said and "every attempt was accepted" not in text
    report = audit(run_dir)
    assert report.sentence == said
    assert report.to_dict()["batch_at_provider"] == held(2, 60)
    assert (
        f"Running the same command again collects the {AT_PROVIDER}, without asking their "
        "queries again, and asks only the other unanswered requests." in report.notes()
    )
    await _run(plan, run_dir, fake)  # the resume collects them: nothing is at the provider
    done = status(run_dir)
    nothing = held(0, 0)
    assert (done["state"], done["batch_at_provider"]) == ("finished", nothing)
    assert AT_PROVIDER not in done["sentence"] and AT_PROVIDER not in audit(run_dir).sentence
    assert max(fake.ran.values()) == 1


async def test_a_job_killed_mid_collection_is_said_as_it_stands(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed while recording a job's lines: only the lines not yet in the ledger are still
    at the provider (a tester's status said the job's 560, beside 294 accepted), and the line
    being recorded is said as the resume records it, collected from the job and not sent
    again (status and audit said "in flight", "dispatched but no result")."""
    plan = kit.write_plan(tmp_path / "plan.parquet", kit.plan_rows(MODEL, 20))
    run_dir = tmp_path / "run"
    fake, calls = FakeBatch(), Counter[str]()

    def dying(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 8:  # 7 lines recorded, the 8th's dispatch line written
            raise Killed("mid-collection")
        return settle(*args, **kw)

    monkeypatch.setattr(batch_lane, "settle", dying)
    await _run(plan, run_dir, fake)
    monkeypatch.setattr(batch_lane, "settle", settle)
    summary = status(run_dir)
    assert (summary["accepted"], summary["interrupted_unrecorded"]) == (7, 1)
    assert summary["batch_at_provider"] == held(1, 13)
    assert summary["sentence"].endswith("; 1 batch job (13 queries) still at the provider.")
    report = audit(run_dir)
    assert report.to_dict()["batch_at_provider"] == held(1, 13)
    note = (
        "1 batch line was being recorded from its job's results when the run ended: counted "
        "as an interrupted attempt, as the next run of this folder records it; its answer is "
        "collected from its job, the request not sent again"
    )
    assert f"{note}." in report.notes()
    out = StringIO()
    render(summary, Console(file=out, width=400))
    assert note in out.getvalue() and "in flight" not in out.getvalue()
    [shown] = summary["pending_failures"]["examples"]
    await _run(plan, run_dir, fake)  # the resume records the same detail, collects the rest
    torn = scan_attempts(run_dir, ["request_id", "outcome", "detail"]).collect().filter(
        pl.col("outcome") == "interrupted")
    assert torn.rows() == [(shown["request_id"], "interrupted", shown["detail"])]
    assert shown["detail"].startswith("interrupted: batch job job-1's line")
    assert status(run_dir)["batch_at_provider"] == held(0, 0)
    assert max(fake.ran.values()) == 1
