"""Attempts sent and not resolved (a `dispatch` journal line with no result) in `status` and
`audit`: in flight while the run is live; once it died, the `interrupted` attempts the next
run records, so the numbers do not jump at the resume (engine.unresolved). A tester's died
run read "11 attempts, 0 retries" and "every attempt was accepted" with 16 requests sent,
then "16 retry attempts ... interrupted dispatches (16)" after a resume that sent nothing
new for them."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from engine.ledger import Ledger
from engine.status import status
from runs.audit import run_audit
from runs.cli import app

#: r: five timeouts, a sixth attempt sent; q: its first attempt sent; a: accepted; z: never
#: asked. The writer then waits, its two attempts in flight, until it is killed.
_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import UTC, datetime
    from engine.ledger import Ledger
    from engine.records import AttemptRecord, ResponseRecord
    now = datetime.now(UTC)
    ledger = Ledger.open(sys.argv[1])
    for n in range(1, 6):
        ledger.record_dispatch("r", n, "alpha", "sim", now)
        ledger.record_result(AttemptRecord("r", n, "alpha", "sim", now, 1.0,
            "timeout", None, None, None, None, None, "timeout: no reply"), None)
    ledger.record_dispatch("a", 1, "alpha", "sim", now)
    ledger.record_result(
        AttemptRecord("a", 1, "alpha", "sim", now, 1.0, "ok", 200, None, None, 1, 1, ""),
        ResponseRecord("a", "alpha", "baseline", "u", 0, ["e"], ["probability"], "{}", [0.5],
                       "stop", 1, 1, 1, now),
    )
    ledger.record_dispatch("r", 6, "alpha", "sim", now)
    ledger.record_dispatch("q", 1, "alpha", "sim", now)
    print("WROTE", flush=True)
    time.sleep(60)
    """
)


def _folder(run: Path) -> None:
    pl.DataFrame(
        {"request_id": ["r", "q", "a", "z"], "model": ["alpha"] * 4, "arm": ["baseline"] * 4,
         "unit": ["u"] * 4}
    ).write_parquet(run / "plan.parquet")  # fmt: skip
    (run / "spec.toml").write_text('name = "x"\n')


def _views(run: Path) -> dict[str, Any]:
    table = CliRunner().invoke(app, ["audit", str(run)], env={"COLUMNS": "240"})
    assert table.exit_code == 0, table.output
    audit = run_audit(run)
    return {"status": status(run), "audit": audit, "audit_table": table.output}


@pytest.mark.timeout(120)
def test_live_in_flight_then_died_interrupted_then_recovered_alike(tmp_path: Path) -> None:
    _folder(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "WROTE"
        live = _views(tmp_path)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # Live: two attempts in flight, not yet retries; q counts as attempted.
    assert live["status"]["in_flight"] == 2 and live["status"]["interrupted_unrecorded"] == 0
    assert live["status"]["outcomes"] == {"ok": 1, "timeout": 5}
    assert live["status"]["sentence"].endswith("; 2 attempts in flight.")
    assert live["audit"].in_flight == 2
    assert live["audit"].totals.not_attempted == 1  # z only
    assert live["audit"].sentence.endswith("; 2 attempts in flight.")

    died = _views(tmp_path)
    Ledger.open(tmp_path).close()  # the resume's first step: both recorded `interrupted`
    recovered = _views(tmp_path)
    assert died["status"]["interrupted_unrecorded"] == 2
    assert recovered["status"]["interrupted_unrecorded"] == 0
    for key in ("attempts", "outcomes", "retries_by_cause", "retries", "requests_retried",
                "sentence", "pending_failures"):  # fmt: skip
        assert died["status"][key] == recovered["status"][key], key
    assert died["status"]["outcomes"] == {"interrupted": 2, "ok": 1, "timeout": 5}
    assert died["audit"].to_dict() | {"interrupted_unrecorded": 0} == recovered["audit"].to_dict()
    totals = died["audit"].totals
    assert totals.retry_attempts == 7 and totals.retries_by_cause["interrupted"] == 2
    assert totals.given_up["interrupted"] == 2 and totals.given_up["timeout"] == 0
    assert totals.requests_retried == 2 and totals.not_attempted == 1
    assert "every attempt was accepted" not in died["audit"].sentence
    assert died["audit"].sentence == recovered["audit"].sentence
    assert "2 attempts were in flight when the run ended" in died["audit_table"]
    as_json = CliRunner().invoke(app, ["status", str(tmp_path), "--json"])
    assert orjson.loads(as_json.output)["interrupted_unrecorded"] == 0


def test_status_table_says_what_the_unresolved_attempts_are(tmp_path: Path) -> None:
    _folder(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "WROTE"
        live = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert "2 attempts in flight now" in live.output
    died = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert "2 attempts were in flight when the run ended: counted as interrupted" in died.output
    assert "every attempt was accepted" not in died.output
