"""`status` reads a run folder while it is written, after a clean stop and after kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from typer.testing import CliRunner

from engine.audit import audit
from engine.ledger import Ledger
from engine.records import AttemptRecord, ResponseRecord
from engine.status import status

if TYPE_CHECKING:
    from tests.engine.conftest import Kit


def _populate(ledger: Ledger, kit: type[Kit]) -> None:
    """alpha: 3 of 4 accepted (one after two rate limits); beta: one invalid, one auth error."""
    for i in range(3):
        rid = f"alpha-{i}"
        n = 1
        if i == 0:
            for n in (1, 2):
                ledger.record_result(kit.attempt(rid, n, "alpha", "rate_limit"), None)
            n = 3
        ledger.record_result(kit.attempt(rid, n, "alpha", "ok"), kit.response(rid, n, "alpha"))
    ledger.record_result(
        kit.attempt("beta-0", 1, "beta", "invalid_response", "not_a_number: 'x'"), None
    )
    ledger.record_result(kit.attempt("beta-1", 1, "beta", "auth_error", "bad key"), None)


def test_counts_by_model_cause_and_pending_failure(tmp_path: Path, kit: type[Kit]) -> None:
    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)
        live = status(tmp_path)
    done = status(tmp_path)
    assert live["state"] == "live"
    assert done["state"] == "stopped"
    for summary in (live, done):
        assert summary["planned"] == 6
        assert summary["accepted"] == 3
        assert summary["remaining"] == 3
        assert summary["attempts"] == 7
        assert summary["outcomes"] == {
            "auth_error": 1, "invalid_response": 1, "ok": 3, "rate_limit": 2,
        }
        assert summary["retries_by_cause"] == {
            "auth_error": 1, "invalid_response": 1, "rate_limit": 2,
        }
        assert summary["requests_retried"] == 3
        assert summary["models"]["alpha"]["planned"] == 4
        assert summary["models"]["alpha"]["accepted"] == 3
        assert summary["models"]["alpha"]["pending_failures"] == 0
        assert summary["models"]["beta"]["accepted"] == 0
        assert summary["models"]["beta"]["pending_failures"] == 2
        pending = summary["pending_failures"]
        assert pending["total"] == 2 and pending["permanent"] == 1
        assert pending["by_outcome"] == {"auth_error": 1, "invalid_response": 1}
        assert [e["request_id"] for e in pending["examples"]] == ["beta-0", "beta-1"]
        assert summary["tokens_in"] == 7 * 50
    assert live["journal_segments"] >= 1 and done["journal_segments"] == 0


def test_finished_and_not_started(tmp_path: Path, kit: type[Kit]) -> None:
    assert status(tmp_path)["state"] == "not started"
    kit.id_plan(tmp_path, {"alpha": 1})
    with Ledger.open(tmp_path) as ledger:
        ok = kit.attempt("alpha-0", 1, "alpha", "ok")
        ledger.record_result(ok, kit.response("alpha-0", 1, "alpha"))
    summary = status(tmp_path)
    assert summary["state"] == "finished" and summary["remaining"] == 0


_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import UTC, datetime
    from engine.ledger import Ledger
    from engine.records import AttemptRecord
    ledger = Ledger.open(sys.argv[1])
    for n in range(1, 6):
        ledger.record_dispatch("r", n, "alpha", "sim", datetime.now(UTC))
        ledger.record_result(AttemptRecord("r", n, "alpha", "sim", datetime.now(UTC), 1.0,
            "timeout", None, None, None, None, None, "timeout: no reply"), None)
    ledger.record_dispatch("r", 6, "alpha", "sim", datetime.now(UTC))
    print("WROTE", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.timeout(60)
def test_live_then_died_after_kill_nine(tmp_path: Path) -> None:
    """status and audit read a run while it is written, after kill -9, and once the attempt
    in flight is recorded as interrupted (the next open of the ledger)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "WROTE"
        live = status(tmp_path)
        assert live["state"] == "live" and live["pid"]["pid"] == child.pid
        assert live["outcomes"] == {"timeout": 5}
        live_audit = audit(tmp_path).totals
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    dead = status(tmp_path)
    assert dead["state"] == "died"
    assert live["in_flight"] == 1 and dead["in_flight"] == 0
    # The 6th, sent and never resolved, counts as the interrupted attempt the next open
    # records (engine.unresolved), in status and, once the writer is gone, in the audit;
    # while it is live, the audit counts it in flight only.
    assert dead["outcomes"] == {"interrupted": 1, "timeout": 5}
    assert dead["interrupted_unrecorded"] == 1
    assert live_audit.retry_attempts == 5 and live_audit.retries_by_cause["timeout"] == 5
    assert live_audit.given_up["timeout"] == 1 and live_audit.requests_retried == 1
    dead_audit = audit(tmp_path).totals
    Ledger.open(tmp_path).close()
    assert status(tmp_path)["outcomes"] == {"interrupted": 1, "timeout": 5}
    recovered = audit(tmp_path).totals
    assert recovered.retry_attempts == 6 and recovered.retries_by_cause["interrupted"] == 1
    assert recovered.given_up["interrupted"] == 1 and recovered.given_up["timeout"] == 0
    assert dead_audit == recovered


def test_command_line_json_and_table(tmp_path: Path, kit: type[Kit]) -> None:
    from runs.cli import app

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)
    runner = CliRunner()
    as_json = runner.invoke(app, ["status", str(tmp_path), "--json"])
    assert as_json.exit_code == 0, as_json.output
    parsed = orjson.loads(as_json.output)
    assert parsed["accepted"] == 3 and parsed["planned"] == 6
    # Additive: each model's time left, as the table shows it; none while no run is live.
    assert [m["eta_s"] for m in parsed["models"].values()] == [None, None]
    table = runner.invoke(app, ["status", str(tmp_path)])
    assert table.exit_code == 0, table.output
    assert "stopped" in table.output and "3/4" in table.output and "rate limits" in table.output
    missing = runner.invoke(app, ["status", str(tmp_path / "nope")])
    assert missing.exit_code == 2


def test_status_reads_the_frozen_spec_once_for_its_parser_and_budget(
    tmp_path: Path, kit: type[Kit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It read and parsed `spec.toml` twice, once for the parser and once for the
    answer-failure budget."""
    import runs.audit
    from runs.cli import app

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)
    (tmp_path / "spec.toml").write_text(
        'parser = "lenient"\nmax_attempts = 5\nmax_answer_failures = 2\n', encoding="utf-8"
    )
    frozen_spec = runs.audit._frozen_spec
    reads: list[Path] = []

    def counted(run_dir: Path) -> dict[str, Any] | None:
        reads.append(run_dir)
        return frozen_spec(run_dir)

    monkeypatch.setattr(runs.audit, "_frozen_spec", counted)
    assert runs.audit.parser_and_budget(tmp_path) == ("lenient", 2)
    reads.clear()
    result = CliRunner().invoke(app, ["status", "--json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert reads == [tmp_path]


def test_refused_duplicate_acceptances_are_counted(tmp_path: Path, kit: type[Kit]) -> None:
    with Ledger.open(tmp_path) as ledger:
        for n in (1, 2):
            ok = kit.attempt("alpha-0", n, "alpha", "ok")
            ledger.record_result(ok, kit.response("alpha-0", n, "alpha"))
    summary = status(tmp_path)
    assert summary["accepted"] == 1 and summary["outcomes"] == {"ok": 2}
    assert summary["duplicate_ok_attempts"] == 1
    assert summary["pending_failures"]["total"] == 0


def test_lane_states_from_the_engine_are_shown(tmp_path: Path, kit: type[Kit]) -> None:
    from runs.cli import app

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)
    (tmp_path / "logs").mkdir()
    lanes = {
        "updated_at": "2026-03-02T21:00:00+00:00",
        "lanes": {
            "alpha": {"state": "done", "message": "", "rate_per_s": 12.5,
                      "gave_up_after_max_attempts": 1, "gave_up_answer_budget_spent": 2,
                      "gave_up_permanent": 0},
            "beta": {"state": "stopped", "message": "beta (sim): 401 invalid api key",
                     "rate_per_s": 0.0},
        },
    }
    (tmp_path / "logs" / "lanes.json").write_bytes(orjson.dumps(lanes))
    summary = status(tmp_path)
    assert summary["models"]["beta"]["lane_state"] == "stopped"
    assert "invalid api key" in summary["models"]["beta"]["lane_message"]
    assert summary["models"]["alpha"]["rate_per_s"] == 12.5
    # Additive: the requests its lane gave up this run, which `status` says beside "done".
    assert summary["models"]["alpha"]["lane_gave_up"] == 3
    assert summary["models"]["beta"]["lane_gave_up"] is None  # a lanes.json without them
    table = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert table.exit_code == 0 and "invalid api key" in table.output
    accepted = summary["models"]["alpha"]["accepted"]
    row = next(line for line in table.output.splitlines() if "alpha" in line)
    # The state alone ("done in part"): the row's cells hold the counts (a review's cell
    # "done in part: 616 of 702 answered, 86 gave up" wrapped over five lines at 80 columns).
    assert f"{accepted}/4" in row and "done in part" in row and "answered" not in row, row


def test_a_dead_runs_lanes_read_as_left_when_it_died(tmp_path: Path, kit: type[Kit]) -> None:
    from runs.cli import app

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)
    (tmp_path / "logs").mkdir()
    lanes = {"lanes": {"alpha": {"state": "running", "message": "", "rate_per_s": 9.0},
                       "beta": {"state": "stopped", "message": "beta (sim): 401 bad key",
                                "rate_per_s": 0.0}}}
    (tmp_path / "logs" / "lanes.json").write_bytes(orjson.dumps(lanes))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that named a process once and names none now
    (tmp_path / "run.pid").write_bytes(
        orjson.dumps({"pid": gone.pid, "create_time": 0.0, "host": "here"})
    )
    summary = status(tmp_path)
    assert summary["state"] == "died"
    assert summary["models"]["alpha"]["lane_state"] == "running"  # what the lane last said
    table = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert table.exit_code == 0
    assert "running when the run died" in table.output
    assert "stopped: beta (sim): 401 bad key" in table.output
    # A run that stopped on a full disk could not write its lanes' last states either.
    (tmp_path / "run.pid").unlink()
    assert status(tmp_path)["state"] == "stopped"
    table = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert "running when the run stopped" in table.output
    assert "when the run died" not in table.output



def test_a_damaged_lanes_file_is_read_as_far_as_it_can_be(tmp_path: Path, kit: type[Kit]) -> None:
    """A `lanes.json` edited by hand or damaged on disk ("rate_per_s": "fast") ended a live
    run's `status` in a TypeError; its lists and numbers reached the audit's lines as reprs."""
    from runs.cli import app

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)
    (tmp_path / "logs").mkdir()
    lanes = {"lanes": {
        "alpha": {"state": "running", "rate_per_s": "fast", "held_s": "x", "held_by": 3},
        "beta": {"state": "stopped", "provider": 7, "message": ["x"], "reason": {"a": 1}},
        "gamma": "not a lane",
    }}  # fmt: skip
    (tmp_path / "logs" / "lanes.json").write_bytes(orjson.dumps(lanes))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a live writer, so the time left is worked out from the damaged rate and hold
        import psutil

        made = psutil.Process(sleeper.pid).create_time()
        (tmp_path / "run.pid").write_bytes(
            orjson.dumps({"pid": sleeper.pid, "create_time": made, "host": None})
        )
        summary = status(tmp_path)
        table = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    finally:
        sleeper.kill()
        sleeper.wait()
    assert summary["state"] == "live"
    alpha = summary["models"]["alpha"]
    assert alpha["lane_state"] == "running"
    assert alpha["rate_per_s"] is None and alpha["lane_held_s"] is None
    assert alpha["lane_held_by"] is None
    assert summary["models"]["beta"]["lane_message"] is None
    assert table.exit_code == 0, table.output
    assert "Traceback" not in table.output
    ends = audit(tmp_path).lane_end_lines()
    assert ends == ["beta (sim): 2 of 2 requests unanswered; its lane stopped"], ends


def test_a_folder_stopped_while_planning_says_how_to_go_on(tmp_path: Path) -> None:
    from runs.cli import app

    # What a hangup in a run's first seconds leaves: its spec, no plan, a dead writer's pid.
    (tmp_path / "spec.toml").write_text('name = "x"\n')
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "run.pid").write_bytes(
        orjson.dumps({"pid": gone.pid, "create_time": 0.0, "host": "here"})
    )
    table = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert table.exit_code == 0
    lines = table.output.strip().splitlines()
    assert lines[1:] == [
        "no plan: the run died while planning; run the same command again to plan and start"
    ]
    (tmp_path / "run.pid").unlink()
    table = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert table.output.strip().splitlines() == [
        f"{tmp_path}: not started",
        "no plan yet: `dutchbook run` with this folder as --out plans and starts it",
    ]

_BUSY_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from engine.ledger import Ledger
    from engine.records import AttemptRecord, ResponseRecord
    ledger = Ledger.open(sys.argv[1])
    print("READY", flush=True)
    now = datetime.now(UTC)
    for i in range(100_000):
        rid = f"r{i:06d}"
        ledger.record_dispatch(rid, 1, "alpha", "sim", now)
        ledger.record_result(
            AttemptRecord(rid, 1, "alpha", "sim", now, 1.0, "ok", 200, None, None, 1, 1, ""),
            ResponseRecord(rid, "alpha", "a", "u", 0, ["e"], ["probability"], "{}", [0.5],
                           "stop", 1, 1, 1, now),
        )
        if i % 50 == 49:
            ledger.compact()
    """
)


#: Reads of a live run: at least this many, and on until the writer is seen to move.
_READS = 25
#: How long to keep reading for that move: a loaded machine can starve the writer for a
#: while (25 reads take about a second: all of them can fall before its first record).
_MOVE_WITHIN_S = 60.0


@pytest.mark.timeout(120)
def test_status_while_a_writer_compacts_never_fails_nor_goes_backwards(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _BUSY_WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "READY"
        seen: list[int] = []
        deadline = time.monotonic() + _MOVE_WITHIN_S
        while len(seen) < _READS or (seen[-1] == seen[0] and time.monotonic() < deadline):
            summary = status(tmp_path)
            # One journal read for both tables: attempts may lead answers, never trail them.
            assert summary["accepted"] <= summary["outcomes"].get("ok", 0)
            assert summary["state"] == "live"
            seen.append(summary["accepted"])
        assert seen == sorted(seen) and seen[-1] > seen[0]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    after = status(tmp_path)
    assert after["state"] == "died" and after["accepted"] >= seen[-1]
    # The attempt it had sent when killed, if any, counts as the interrupted one it becomes.
    assert after["interrupted_unrecorded"] in (0, 1)
    assert after["accepted"] == after["attempts"] - after["interrupted_unrecorded"]


def _fraction_accepted() -> tuple[AttemptRecord, ResponseRecord]:
    """An attempt and the answer a lenient run accepted from it, which strict rejects."""
    from tests.engine.test_reparse import T0

    raw = '{"probability": "11/36"}'
    attempt = AttemptRecord(
        request_id="frac", attempt=1, model="m1", provider="sim", started_at=T0,
        elapsed_ms=250.0, outcome="ok", http_status=200, provider_request_id=None,
        retry_after_s=None, tokens_in=90, tokens_out=9, detail="", raw_text=raw,
        finish_reason="stop",
    )
    answer = ResponseRecord(
        request_id="frac", model="m1", arm="baseline", unit="AAPL@2024-01-02", pass_=0,
        events=["e0"], keys=["probability"], raw_text=raw, values=[11 / 36],
        finish_reason="stop", tokens_in=90, tokens_out=9, attempts=1, accepted_at=T0,
    )
    return attempt, answer


def test_an_answer_a_strict_reparse_rejected_is_pending_as_rejected_not_as_ok(
    tmp_path: Path,
) -> None:
    """Before, status listed such a request as failed with the outcome "ok", permanent."""
    from engine.reparse import reparse

    attempt, answer = _fraction_accepted()
    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(attempt, answer)
    assert reparse(tmp_path, "strict").newly_rejected == 1
    pending = status(tmp_path)["pending_failures"]
    assert pending["by_outcome"] == {"invalid_response": 1}
    assert pending["permanent"] == 0
    assert pending["examples"][0]["detail"] == "rejected_on_reparse"


def _timed_out(request_id: str) -> AttemptRecord:
    """One attempt of model m1 that timed out (a retryable failure), its request unanswered."""
    from tests.engine.test_reparse import T0

    return AttemptRecord(
        request_id=request_id, attempt=1, model="m1", provider="sim", started_at=T0,
        elapsed_ms=30_000.0, outcome="timeout", http_status=None, provider_request_id=None,
        retry_after_s=None, tokens_in=0, tokens_out=0, detail="read timed out",
    )


def test_a_reply_a_strict_reparse_rejected_is_neither_a_retry_nor_a_failure(
    tmp_path: Path,
) -> None:
    """The audit counted such a reply as an invalid-response retry attempt and its request
    as given up, and status listed it as a request that failed (not permanently), where the
    run had accepted it and asked nothing more. Both now count it apart, and say the same."""
    import io

    from rich.console import Console

    from engine.reparse import reparse
    from runs.commands.status import render

    fraction, answer = _fraction_accepted()
    slow = _timed_out("slow")
    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(fraction, answer)
        ledger.record_result(slow, None)
    assert reparse(tmp_path, "strict").newly_rejected == 1

    summary, report = status(tmp_path), audit(tmp_path)
    assert summary["retries"] == report.totals.retry_attempts == 1  # the timeout alone
    assert summary["retries_by_cause"] == {"timeout": 1} and summary["requests_retried"] == 1
    assert {k: v for k, v in report.totals.given_up.items() if v} == {"timeout": 1}
    assert summary["answers_rejected_on_reparse"] == 1
    assert report.totals.answers_rejected_on_reparse == 1
    assert summary["models"]["m1"]["answers_rejected_on_reparse"] == 1
    assert summary["pending_failures"]["total"] == 2  # pending, as documented
    assert summary["pending_failures"]["failed"] == summary["models"]["m1"]["failed"] == 1
    assert summary["pending_failures"]["failed_by_outcome"] == {"timeout": 1}
    assert summary["sentence"] == report.sentence == (
        "1 retry attempt across 1 request out of 2, attributed to timeouts (1); 1 reply the "
        "run accepted was rejected by `dutchbook reparse --parser strict`, not retried."
    )
    assert report.notes() == [f"{summary['notes'][0]}."]

    out = io.StringIO()
    render(summary, Console(file=out, width=400, color_system=None))
    said = out.getvalue()
    assert "1 request failed and is not yet answered (0 permanent): timeouts 1\n" in said
    assert "slow [m1] after 1 attempt: timeout read timed out" in said
    assert "frac [m1]" not in said and "invalid_response" not in said
    assert "1 retry attempt across 1 request" in said
    [row] = [line for line in said.splitlines() if line.startswith("│ m1")]
    assert [cell.strip() for cell in row.split("│")][4:6] == ["1", "1"]  # retries, failed


@pytest.mark.timeout(60)
def test_a_resume_starting_reads_the_died_runs_dispatches_as_interrupted(tmp_path: Path) -> None:
    """A hostile pass polled `status` through a resume's start: once its pid file was written,
    before its ledger recorded the died run's unresolved dispatches, those read as its own
    in flight, and the attempts fell from 1,270 to 1,231 (back up a moment later)."""
    from engine.runlock import PID_FILE, write_pid

    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "WROTE"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    dead = status(tmp_path)
    time.sleep(1.1)  # the resume starts in a later second than the died run's last dispatch
    write_pid(tmp_path)  # this process, as a resume's start writes it
    try:
        starting = status(tmp_path)
        assert starting["state"] == "live"
        assert starting["outcomes"] == dead["outcomes"] == {"interrupted": 1, "timeout": 5}
        assert starting["in_flight"] == 0 and starting["interrupted_unrecorded"] == 1
        assert starting["attempts"] == dead["attempts"] == 6
    finally:
        (tmp_path / PID_FILE).unlink()


def test_a_live_runs_batch_line_of_an_earlier_job_is_its_own_in_flight(tmp_path: Path) -> None:
    """A batch line carries its job's planned time, which an earlier run may have set: read
    by that time, a live resume's own line collected from such a job was called a died
    run's interrupted attempt (a review of the split by the writer's start)."""
    from datetime import UTC, datetime, timedelta

    with Ledger.open(tmp_path) as ledger:  # this process: the live writer
        planned = datetime.now(UTC) - timedelta(hours=1)
        ledger.record_dispatch("r-1", 1, "alpha", "sim", planned, batch_job="job-1")
        ledger.record_dispatch("r-2", 1, "alpha", "sim", datetime.now(UTC))
        live = status(tmp_path)
        assert live["state"] == "live"
        assert live["in_flight"] == 2 and live["interrupted_unrecorded"] == 0, live
        assert live["outcomes"] == {}


def test_a_live_runs_attempt_its_closed_ledger_left_is_in_flight_no_more(
    tmp_path: Path,
) -> None:
    """A stop cut an attempt at a hung provider; the run, still scoring with its pid file
    held, closed with "1 attempt in flight", where `status` once it exited said the attempt
    was interrupted. Its ledger closed, the attempt is read as the next run records it; a
    ledger this process opens again has its own in flight again."""
    from datetime import UTC, datetime

    from engine.runlock import PID_FILE, write_pid

    write_pid(tmp_path)  # this process: `dutchbook run`, holding its pid file throughout
    try:
        with Ledger.open(tmp_path) as ledger:
            ledger.record_dispatch("r-1", 1, "alpha", "sim", datetime.now(UTC))
            dispatching = status(tmp_path)
        scoring = status(tmp_path)
        with Ledger.open(tmp_path) as ledger:  # records r-1 interrupted, as a resume does
            ledger.record_dispatch("r-2", 1, "alpha", "sim", datetime.now(UTC))
            again = status(tmp_path)
    finally:
        (tmp_path / PID_FILE).unlink()
    assert dispatching["state"] == scoring["state"] == again["state"] == "live"
    assert dispatching["in_flight"] == 1 and dispatching["interrupted_unrecorded"] == 0
    assert scoring["in_flight"] == 0 and scoring["interrupted_unrecorded"] == 1
    assert scoring["outcomes"] == again["outcomes"] == {"interrupted": 1}
    assert again["in_flight"] == 1 and again["interrupted_unrecorded"] == 0


def test_a_live_run_whose_lanes_stopped_updating_is_said_so(tmp_path: Path) -> None:
    """A tester froze a run (SIGSTOP) for 30 s: `status` still said it was live, its lanes
    running, their ETAs frozen. A live run whose lanes, some still asking, have not rewritten
    `logs/lanes.json` (every second) for over `LANES_STALE_S` is said so in the header; not a
    run whose lanes have all ended (scoring, the report: the file stands still by design)."""
    import io
    from datetime import UTC, datetime, timedelta

    from rich.console import Console

    from runs.commands.status import LANES_STALE_S, render

    slow = _timed_out("slow")
    with Ledger.open(tmp_path) as ledger:
        ledger.record_result(slow, None)

    def header(age_s: float, lane: str, run_age_s: float = 3600.0) -> str:
        summary = status(tmp_path)
        summary["state"] = "live"
        now = datetime.now(UTC)
        started = (now - timedelta(seconds=run_age_s)).isoformat()
        summary["pid"] = {"pid": 1, "host": "h", "started_at": started}
        summary["lanes_updated_at"] = (now - timedelta(seconds=age_s)).isoformat()
        summary["models"]["m1"]["lane_state"] = lane
        out = io.StringIO()
        render(summary, Console(file=out, width=400, color_system=None))
        return out.getvalue().splitlines()[0]

    said = "but no lane has said anything for 0:3"  # 0:30, or 0:31 on a slow machine
    assert said in header(30.0, "running") and "stopped (SIGSTOP" in header(30.0, "running")
    assert said in header(30.0, "waiting")
    assert "no lane has said" not in header(LANES_STALE_S / 2, "running")
    assert "no lane has said" not in header(30.0, "done")
    # An earlier run's file, before the resume that started 5 s ago first writes its own.
    assert "no lane has said" not in header(9_000.0, "running", run_age_s=5.0)


def test_status_counts_a_lanes_time_left_and_given_up_as_dispatch_does(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """`status --json`'s `eta_s` was added by the command, from `lanes.json` by a copy of
    `LaneStats.eta_s`'s formula, and `lane_gave_up` summed the file's counts by a copy of
    `LaneStats.given_up`'s: `engine.status.status` carries both, each counted by the one
    definition dispatch counts by (`engine.lane_counts.time_left_s`, `GAVE_UP_KEYS`)."""
    from engine.lanefile import write_lane_states
    from engine.lanes import LaneState, LaneStats
    from engine.runlock import PID_FILE, write_pid

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)  # alpha: 3 of 4 accepted; beta: none
    alpha = LaneStats(model="alpha", provider="sim", planned=4, accepted=3,
                      state=LaneState.RUNNING, started=time.monotonic() - 6.0)  # fmt: skip
    alpha.held_until, alpha.held_by = time.monotonic() + 30.0, "Retry-After"
    alpha.retries.exhausted, alpha.gave_up = 1, 2
    beta = LaneStats(model="beta", provider="sim", planned=2, state=LaneState.DONE)
    beta.retries.answer_budget_spent = 2
    write_lane_states(tmp_path, [alpha, beta])
    write_pid(tmp_path)  # this process: the run is live
    try:
        models = status(tmp_path)["models"]
    finally:
        (tmp_path / PID_FILE).unlink()
    assert alpha.eta_s is not None and alpha.eta_s > 30.0  # the hold, then the one left
    assert models["alpha"]["eta_s"] == pytest.approx(alpha.eta_s, abs=0.5)
    assert models["beta"]["eta_s"] == beta.eta_s == 0.0  # done, though it gave up two
    assert models["alpha"]["lane_gave_up"] == alpha.given_up == 3
    assert models["beta"]["lane_gave_up"] == beta.given_up == 2
    assert status(tmp_path)["models"]["alpha"]["eta_s"] is None  # no run is live


def test_status_counts_a_lanes_time_left_no_faster_than_its_limits_allow(
    tmp_path: Path, kit: type[Kit]
) -> None:
    """`status` said 25:44 left of 140 queries at rpm 2, the rate its first answers came at,
    where some 68 minutes were: it reads the lane's limit from `lanes.json` and counts the
    time left no faster, as the live line does."""
    from engine.lanefile import write_lane_states
    from engine.lanes import LaneState, LaneStats
    from engine.runlock import PID_FILE, write_pid

    kit.id_plan(tmp_path, {"alpha": 4, "beta": 2})
    with Ledger.open(tmp_path) as ledger:
        _populate(ledger, kit)  # alpha: 3 of 4 accepted
    alpha = LaneStats(model="alpha", provider="sim", planned=4, accepted=3, rpm=2.0,
                      state=LaneState.RUNNING, started=time.monotonic() - 6.0)  # fmt: skip
    write_lane_states(tmp_path, [alpha])
    write_pid(tmp_path)  # this process: the run is live
    try:
        models = status(tmp_path)["models"]
    finally:
        (tmp_path / PID_FILE).unlink()
    assert models["alpha"]["lane_limit_rate_per_s"] == pytest.approx(1 / 30, abs=1e-6)
    assert models["alpha"]["eta_s"] == pytest.approx(30.0, abs=0.01)  # not 2 s at 0.5/s
    assert alpha.eta_s == pytest.approx(30.0)
