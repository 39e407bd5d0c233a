"""A batch run whose `batches/jobs.jsonl` was lost: a job the engine's log says was created,
which the ledger does not hold every line of, stops the resume before anything is sent (its
requests would be bought again); `--abandon-batch-jobs` naming it gives it up."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from rich.console import Console
from typer.testing import CliRunner

from engine import batch_lost
from engine.batch_jobs import JOBS_FILE, BatchJob, JobRecords
from engine.batch_lost import ENGINE_LOG
from engine.scan import scan_attempts
from providers.batch import JobState, JobStatus
from runs.cli import app
from runs.pipeline import RunError, _check_lost_jobs, run_campaign

SPEC = (
    'name = "b"\nseed = 7\nparser = "lenient"\nsim_faults = "batch_seconds=0"\n'
    '[data]\nstock_days = 2\n[[models]]\nname = "simb"\nprovider = "sim"\n'
    'model = "sim-coherent"\ndispatch = "batch"\nbatch_max_lines = 5\n'
    '[[arms]]\nname = "baseline"\n'
)


def _run(spec: Path, out: Path, abandon: tuple[str, ...] = ()) -> str:
    console = Console(file=io.StringIO(), width=400)
    result = asyncio.run(run_campaign(spec, out, console=console, progress=False,
                                      abandon_batch_jobs=abandon))
    assert result.summary is not None and result.summary.complete
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def _status(out: Path) -> dict[str, object]:
    shown = CliRunner().invoke(app, ["status", str(out), "--json"])
    assert shown.exit_code == 0, shown.output
    summary = orjson.loads(shown.stdout)
    assert isinstance(summary, dict)
    return summary


def _status_warnings(out: Path) -> list[str]:
    warnings = _status(out)["warnings"]
    assert isinstance(warnings, list)
    return warnings


def _attempts(out: Path) -> int:
    return scan_attempts(out, ["request_id"]).collect().height


@pytest.mark.timeout(120)
def test_a_lost_jobs_file_stops_the_resume_until_its_jobs_are_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = tmp_path / "spec.toml", tmp_path / "out"
    spec.write_text(SPEC, encoding="utf-8")
    _run(spec, out)
    asked = _attempts(out)
    # The simulator inside the run held its jobs, and its log says so: gone with the run,
    # none can be lost. Without that mark (a provider's jobs), each collected in full and
    # then its records lost is written down once as collected, and nothing is asked again.
    lines = (out / ENGINE_LOG).read_bytes().splitlines()
    created = [orjson.loads(line) for line in lines if b'"batch_job_created"' in line]
    assert created and all(event["simulated_in_process"] is True for event in created)
    (out / ENGINE_LOG).write_bytes(
        b"\n".join(line.replace(b',"simulated_in_process":true', b"") for line in lines) + b"\n"
    )
    (out / JOBS_FILE).unlink()
    assert "gave up" not in _run(spec, out)
    assert _attempts(out) == asked
    written = [orjson.loads(line) for line in (out / JOBS_FILE).read_bytes().splitlines()]
    assert sorted(r["job_key"] for r in written if r["event"] == "collected") == sorted(
        event["job_key"] for event in created
    )

    # A job created (the log says) whose lines the ledger does not hold.
    with (out / ENGINE_LOG).open("ab") as log:
        log.write(orjson.dumps({"event": "batch_job_created", "model": "simb",
                                "job_key": "db-simb-lost", "job_id": "job-lost",
                                "lines": 4}) + b"\n")
    with pytest.raises(RunError) as refused:
        _run(spec, out)
    said = str(refused.value)
    assert "1 batch job created at the provider" in said and "db-simb-lost" in said
    assert "pay for them twice" in said and said.endswith("nothing was sent")
    assert _attempts(out) == asked
    with pytest.raises(RunError, match="db-simb-typo is not a batch job"):
        _run(spec, out, ("db-simb-typo",))
    live = tmp_path / "live.toml"  # `dispatch` may change on resume: a live lane pays too
    live.write_text(SPEC.replace('dispatch = "batch"\n', ""), encoding="utf-8")
    with pytest.raises(RunError, match="db-simb-lost"):
        _run(live, out)
    assert any("db-simb-lost" in line for line in _status_warnings(out))
    assert _status(out)["lost_batch_jobs"] == ["db-simb-lost"]

    said = _run(spec, out, ("job-lost",))
    assert "gave up 1 batch job whose records were lost" in said
    assert "gave up" not in _run(spec, out)  # written down: said once
    assert not any("db-simb-lost" in line for line in _status_warnings(out))
    assert _status(out)["lost_batch_jobs"] == []


@pytest.mark.timeout(120)
def test_a_resume_logs_the_jobs_the_log_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs recorded in the jobs file whose `batch_job_created` lines a kill (an earlier
    version logged after recording) or a full disk kept from the log: the resume logs them
    before anything else, so a later loss of the jobs file still names every one."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = tmp_path / "spec.toml", tmp_path / "out"
    spec.write_text(SPEC, encoding="utf-8")
    _run(spec, out)
    lines = (out / ENGINE_LOG).read_bytes().splitlines()
    keys = sorted(orjson.loads(line)["job_key"] for line in lines if b'"batch_job_created"' in line)
    assert keys
    (out / ENGINE_LOG).write_bytes(
        b"".join(line + b"\n" for line in lines if b'"batch_job_created"' not in line)
    )
    _run(spec, out)
    again = [orjson.loads(line) for line in (out / ENGINE_LOG).read_bytes().splitlines()
             if b'"batch_job_created"' in line]  # fmt: skip
    assert sorted(event["job_key"] for event in again) == keys
    assert all(event["logged_late"] is True for event in again)


def test_a_resume_reads_the_engine_log_once_for_jobs_unlogged_and_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume's check logged the jobs the log missed, then read the whole log again for
    the jobs the jobs file lost (hundreds of megabytes at paper scale): one read does both,
    and says the same."""
    records = JobRecords(tmp_path)
    job = BatchJob("db-m-1", "m", "openai", {"r1": 1})
    records.planned(job)
    records.created(job, JobState("job-1", JobStatus.RUNNING, "running"))  # never logged
    (tmp_path / ENGINE_LOG).parent.mkdir(parents=True)
    (tmp_path / ENGINE_LOG).write_bytes(orjson.dumps(
        {"event": "batch_job_created", "model": "m", "job_key": "db-m-2", "job_id": "job-2",
         "lines": 2}) + b"\n")  # fmt: skip
    reads: list[Path] = []
    created_lines = batch_lost._created_lines

    def counted(path: Path) -> Iterator[bytes]:
        reads.append(path)
        return created_lines(path)

    monkeypatch.setattr(batch_lost, "_created_lines", counted)
    console = Console(file=io.StringIO())
    with pytest.raises(RunError) as info:
        _check_lost_jobs(tmp_path, frozenset(), console)
    assert "does not know (db-m-2; 2 lines not in the ledger)" in str(info.value)
    assert len(reads) == 1
    events = [orjson.loads(line) for line in (tmp_path / ENGINE_LOG).read_bytes().splitlines()]
    assert [(e["job_key"], e.get("logged_late")) for e in events] == [
        ("db-m-2", None), ("db-m-1", True)
    ]
