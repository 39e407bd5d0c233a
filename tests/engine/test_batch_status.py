"""`status` and the audit of a batch run stopped with its jobs still at the provider: a
tester's read "not started", "every attempt was accepted (0 of 28 requests attempted so
far)" and "running the same command again asks only the unanswered requests", where a
resume collects the jobs and asks none of their queries again."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from engine.audit import audit
from engine.dispatch import dispatch
from engine.retry import RetryPolicy
from engine.status import status
from providers.types import ModelConfig
from runs.commands.status import render
from tests.engine.batch_fake import FakeBatch

if TYPE_CHECKING:
    from tests.engine.conftest import Kit

MODEL = "fake-batch"
AT_PROVIDER = "2 batch jobs (60 queries) still at the provider"


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
    fake = FakeBatch(kill_at=("poll", 1, "before"))  # both jobs created, none collected
    await _run(plan, run_dir, fake)
    summary = status(run_dir)
    assert (summary["state"], summary["attempts"]) == ("stopped", 0)
    assert summary["batch_at_provider"] == {"jobs": 2, "queries": 60}
    out = StringIO()
    render(summary, Console(file=out, width=300))
    text = out.getvalue()
    assert text.splitlines()[0] == f"{run_dir}: stopped, {AT_PROVIDER}"
    said = f"No attempts recorded yet (0 of 60 requests attempted); {AT_PROVIDER}."
    assert summary["sentence"] == said and "every attempt was accepted" not in text
    report = audit(run_dir)
    assert report.sentence == said
    assert report.to_dict()["batch_at_provider"] == {"jobs": 2, "queries": 60}
    assert (
        f"Running the same command again collects the {AT_PROVIDER}, without asking their "
        "queries again, and asks only the other unanswered requests." in report.notes()
    )
    await _run(plan, run_dir, fake)  # the resume collects them: nothing is at the provider
    done = status(run_dir)
    assert (done["state"], done["batch_at_provider"]) == ("finished", {"jobs": 0, "queries": 0})
    assert AT_PROVIDER not in done["sentence"] and AT_PROVIDER not in audit(run_dir).sentence
    assert max(fake.ran.values()) == 1
