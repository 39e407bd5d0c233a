"""The audit of a campaign run against the simulator with faults.

Proof of the retry accounting: the retry attempts `dutchbook audit` reads from the run
folder equal, cause by cause, the faults the simulator says it injected; and `run`'s
summary, `status --json` and `audit --json` agree on the same folder (one definition).
The forecasters are the simulator's (labelled simulated).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console
from typer.testing import CliRunner

from providers.sim.faults import expected_failures
from runs.cli import app
from runs.pipeline import run_campaign

# Every kind of fault, often; `slow` replies come well after the models' timeout (4 s against
# 2.5 s, so a reply merely slowed by a loaded machine is not a timeout), so each is a
# timeout. The coherent and noisy forecasters always answer in a form the lenient parser
# takes, so every failed attempt is an injected fault.
# Faults are drawn in the order requests reach the simulator, which a loaded machine changes,
# so which request gets which is chance: with the default budgets (3 answer failures, 8
# attempts) one of the 84 requests was once given up after three answer faults in a row
# (10% of attempts draw an answer fault: 84 * 0.1**3, several runs in a hundred). With 8
# answer failures and 16 attempts (84 * 0.1**8, and 84 * 0.33**16 for any fault), about
# 2e-6, so "everything answered in the end" holds.
SPEC = """
name = "faulty"
seed = 5
parser = "lenient"
sim_faults = "{faults}"
max_attempts = 16
max_answer_failures = 8

[data]
stock_days = 2

[[models]]
name = "coherent"
provider = "sim"
model = "sim-coherent"
timeout_s = 2.5

[[models]]
name = "noisy"
provider = "sim"
model = "sim-noisy"
timeout_s = 2.5
price_in = 0.5
price_out = 2.0

[[arms]]
name = "baseline"

[[arms]]
name = "complement-pairs"
"""
FAULTS = (
    "rate_limit=0.02,rate_limit_bare=0.05,server_error=0.05,connection_reset=0.03,"
    "truncated_body=0.03,malformed_json=0.04,refusal=0.03,output_cap=0.03,"
    "missing_routing=0.03,slow=0.02,slow_delay_s=4.0"
)


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("faulty")
    spec = root / "faulty.toml"
    spec.write_text(SPEC.format(faults=FAULTS), encoding="utf-8")
    out = io.StringIO()
    result = asyncio.run(
        run_campaign(
            spec, root / "run", progress=False, console=Console(file=out, width=200)
        )
    )
    return result, out.getvalue()


def test_audit_counts_equal_the_faults_the_simulator_injected(campaign) -> None:  # type: ignore[no-untyped-def]
    result, _ = campaign
    counts, report = result.sim_counts, result.audit
    assert counts is not None and report is not None
    injected = expected_failures(counts)
    # enough of each kind that a miscount could not hide
    assert len(injected) >= 8 and sum(injected.values()) >= 30, injected
    assert _nonzero(report.totals.retries_by_cause) == injected
    assert report.totals.attempts == counts["requests"]
    assert report.totals.accepted == report.totals.requests  # everything answered in the end
    assert report.totals.retry_attempts == sum(injected.values())
    assert report.totals.invalid_response_subcauses["malformed_reply"] == counts.get(
        "fault.malformed_json", 0
    )
    # usage is priced where the spec gives prices (failed attempts that reported usage too)
    noisy = report.by_model["noisy"]
    assert noisy.cost_usd == pytest.approx((noisy.tokens_in * 0.5 + noisy.tokens_out * 2.0) / 1e6)
    assert report.by_model["coherent"].cost_usd is None
    assert report.totals.cost_usd == pytest.approx(noisy.cost_usd)
    assert report.providers == {"coherent": "sim", "noisy": "sim"}


def test_run_summary_status_and_audit_agree(campaign, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result, printed = campaign
    run_dir, report, summary = result.run_dir, result.audit, result.summary
    runner = CliRunner()
    audited = runner.invoke(app, ["audit", str(run_dir), "--json"])
    assert audited.exit_code == 0, audited.output
    as_json = orjson.loads(audited.output)  # exactly one object
    shown = runner.invoke(app, ["status", str(run_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    state = orjson.loads(shown.output)
    assert as_json.pop("live") is False  # no run writes the folder now
    assert as_json.pop("warnings") == []  # nothing said on stderr
    assert as_json.pop("rehearsal") is False and as_json.pop("notes") == []  # not --rehearse
    assert as_json == orjson.loads(orjson.dumps(report.to_dict()))
    assert set(as_json) >= {"totals", "by_model", "sentence"}
    for key in (
        "requests", "accepted", "attempts", "retry_attempts", "requests_retried",
        "retries_by_cause", "given_up", "latency_ms", "tokens_in", "tokens_out", "cost_usd",
    ):
        assert key in as_json["totals"] and key in as_json["by_model"]["noisy"]
    totals = as_json["totals"]
    # status counts retries as the audit does
    assert state["retries_by_cause"] == _nonzero(totals["retries_by_cause"])
    assert state["retries"] == totals["retry_attempts"]
    assert state["requests_retried"] == totals["requests_retried"]
    assert state["sentence"] == as_json["sentence"] == report.sentence
    assert summary.retry_attempts == totals["retry_attempts"]  # a fresh folder: one dispatch
    for model, lane in summary.lanes.items():
        by_model = as_json["by_model"][model]
        assert dict(lane.retries.by_cause) == _nonzero(by_model["retries_by_cause"])
        assert state["models"][model]["retries_by_cause"] == by_model["retries_by_cause"]
        assert lane.attempts == by_model["attempts"]
    # the sentence is printed by run and by audit, and written beside the report
    assert report.sentence in printed.replace("\n", " ")
    table = runner.invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and report.sentence in table.output.replace("\n", " ")
    written = orjson.loads((run_dir / "report" / "audit.json").read_bytes())
    assert written["sentence"] == report.sentence
    assert (run_dir / "report" / "audit.csv").read_text().startswith("scope,name,provider")
    summary_json = orjson.loads((run_dir / "report" / "summary.json").read_bytes())
    assert summary_json["audit_sentence"] == report.sentence
    report_md = (run_dir / "report" / "report.md").read_text()
    assert "## Retries and failures" in report_md and report.sentence in report_md


def test_audit_refuses_a_missing_folder_in_one_line(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["audit", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert missing.output.strip().count("\n") == 0
    assert "does not exist; check the path" in missing.output


def test_the_audit_of_a_run_still_going_says_its_counts_are_a_snapshot(campaign) -> None:  # type: ignore[no-untyped-def]
    """Read while a run waited out a Retry-After, the audit showed that request as "given up"
    with no word that the run could still retry it."""
    from engine.runlock import acquire_lock, release_lock, write_pid

    run_dir = campaign[0].run_dir
    fd = acquire_lock(run_dir, run_dir)  # a run writing the folder, as far as audit can tell
    write_pid(run_dir)
    try:
        runner = CliRunner()
        shown = runner.invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "200"})
        as_json = orjson.loads(runner.invoke(app, ["audit", str(run_dir), "--json"]).output)
    finally:
        (run_dir / "run.pid").unlink()
        release_lock(fd)
    assert shown.exit_code == 0, shown.output
    note = shown.output.splitlines()[1]
    assert note.startswith("live (pid ") and "counts as of now" in note
    assert "may still retry" in note
    assert as_json["live"] is True
    after = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "200"})
    assert "counts as of now" not in after.output  # no run: the counts are final


@pytest.mark.parametrize("ended", ["signal", "died", "spend cap", "signal, resume refused",
                                   "signal, some lost", "signal, all lost"])
def test_the_audit_of_a_run_stopped_early_says_given_up_is_not_yet_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ended: str
) -> None:
    """A tester's audit of a run stopped by SIGTERM called its unanswered failed requests
    "given up", where `status` calls them pending and the audit's last line says a resume
    asks them. A run whose lanes a signal stopped, or that died, says so under its title;
    one a spend cap stopped does not (a resume asks nothing until --max-cost is raised)."""
    from engine.lanes import STOP_REQUESTED
    from runs.audit import run_audit

    spec = tmp_path / "refused.toml"  # every answer refused by the strict parser: given up
    spec.write_text(
        'name = "refused"\nseed = 1\nparser = "strict"\nmax_answer_failures = 1\n'
        '[data]\nstock_days = 2\n[[models]]\nname = "f"\nprovider = "sim"\n'
        'model = "sim-fraction"\n[[arms]]\nname = "baseline"\n', encoding="utf-8"
    )  # fmt: skip
    run_dir = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(spec), "--out", str(run_dir)])
    assert sum(run_audit(run_dir).totals.given_up.values())  # what the note is about
    if ended == "died":  # a pid file left by a process that is gone
        (run_dir / "run.pid").write_bytes(orjson.dumps({"pid": 2**22 + 7, "create_time": 1.0}))
    else:
        lanes = orjson.loads((run_dir / "logs" / "lanes.json").read_bytes())
        first = next(iter(lanes["lanes"].values()))
        first["state"] = "cancelled"
        first["reason"] = (
            STOP_REQUESTED if ended.startswith("signal") else "spend cap reached: $1.00 of $1.00"
        )
        (run_dir / "logs" / "lanes.json").write_bytes(orjson.dumps(lanes))
    refused = ended.endswith("resume refused")
    if refused:  # as after a strict reparse of a lenient spec's folder (`resume_refusal`)
        import runs.audit

        audited = runs.audit.run_audit
        monkeypatch.setattr(runs.audit, "run_audit", lambda folder: dataclasses.replace(
            audited(folder), resume_refused="a resume is refused: run the reparse first"))
    lost = {"signal, some lost": 3, "signal, all lost": 28}.get(ended, 0)
    if lost:  # of the 28 given up, those damaged batch results lost twice: asked by no run
        import runs.audit

        audited = runs.audit.run_audit

        def with_lost(folder: Path) -> Any:
            report = audited(folder)
            assert report.totals.given_up_total == 28
            return dataclasses.replace(
                report, totals=dataclasses.replace(report.totals, lost_to_damage=lost))

        monkeypatch.setattr(runs.audit, "run_audit", with_lost)
    shown = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    if ended in ("spend cap", "signal, all lost"):  # no resume asks any of them
        assert "before it ended" not in shown.output
        return
    said = "died" if ended == "died" else "was stopped"
    note = shown.output.splitlines()[1]
    assert note.startswith(f"the run {said} before it ended: a request counted as given up")
    if refused:  # the resume asks nothing until the refusal is cleared: no promise of it
        assert "budget" not in note and "once the refusal said last is cleared" in note
    elif lost:
        assert note.endswith("unless its answer-failure budget is spent or damaged batch "
                             "results lost it twice")
    else:
        assert "asks again unless its answer-failure budget is spent" in note


def _run_with_server_errors(tmp_path: Path, *, parser: str, model: str) -> Path:
    """A run of one attempt per request, about 30% of them server errors: given up."""
    spec = tmp_path / "errors.toml"
    spec.write_text(
        f'name = "errors"\nseed = 1\nparser = "{parser}"\nmax_attempts = 1\n'
        'max_answer_failures = 1\nsim_faults = "server_error=0.3"\n[data]\nstock_days = 2\n'
        f'[[models]]\nname = "m"\nprovider = "sim"\nmodel = "{model}"\n[[arms]]\n'
        'name = "baseline"\n',
        encoding="utf-8",
    )  # fmt: skip
    run_dir = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(spec), "--out", str(run_dir)])
    return run_dir


def test_the_audit_of_a_run_that_ended_says_its_given_up_requests_are_asked_again(
    tmp_path: Path,
) -> None:
    """`max_attempts` is per run: requests a run gave up after it are asked again by the
    same command, which "given up" alone did not say; those whose answer-failure budget is
    spent are not (the note counts the others only)."""
    from runs.audit import run_audit

    run_dir = _run_with_server_errors(tmp_path, parser="strict", model="sim-coherent")
    totals = run_audit(run_dir).totals
    again = totals.given_up_total - totals.answer_budget_spent
    assert again > 1, totals  # server errors: given up after their one attempt
    shown = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[1] == (
        f"{again} requests counted as given up were given up by the run that asked them "
        "(max_attempts, and the stop at a reply repeated at temperature 0, hold per run): "
        "running the same command again asks them again"
    )


def _faulty_spec(tmp_path: Path, budget: int) -> Path:
    """`budget` attempts per request and as many answer failures, a third of the replies
    refusals (answer failures) and a third server errors."""
    spec = tmp_path / f"budget{budget}.toml"
    spec.write_text(
        f'name = "budget"\nseed = 1\nmax_attempts = {budget}\n'
        f'max_answer_failures = {budget}\n'
        'sim_faults = "refusal=0.35,server_error=0.35"\n[data]\nstock_days = 6\n'
        '[[models]]\nname = "m"\nprovider = "sim"\nmodel = "sim-coherent"\n[[arms]]\n'
        'name = "baseline"\n',
        encoding="utf-8",
    )  # fmt: skip
    return spec


def _unanswered_failures(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Per unanswered request: (attempts, answer failures), recounted from the ledger."""
    import polars as pl

    from engine.scan import scan_attempts, scan_responses

    rows = (
        scan_attempts(run_dir, ["request_id", "outcome"])
        .join(scan_responses(run_dir, ["request_id"]), on="request_id", how="anti")
        .group_by("request_id")
        .agg(pl.len(), pl.col("outcome").is_in(["refusal"]).sum().alias("failed"))
        .collect()
    )
    return {r: (int(n), int(f)) for r, n, f in rows.iter_rows()}


def test_a_budget_lowered_on_a_resume_counts_what_the_next_run_will_not_ask(
    tmp_path: Path,
) -> None:
    """`max_answer_failures` lowered from 2 to 1 on a resume: requests with one answer
    failure from the first run are not asked by the second, so the audit counts them as
    spent (it had counted only those whose last attempt said so, and promised that the same
    command asks the others again, which it then did not)."""
    from runs.audit import run_audit

    run_dir = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(_faulty_spec(tmp_path, 2)), "--out", str(run_dir)])
    first = _unanswered_failures(run_dir)
    # The resume, with the budget lowered: it does not ask requests with a failure already.
    CliRunner().invoke(app, ["run", str(_faulty_spec(tmp_path, 1)), "--out", str(run_dir)])
    before = _unanswered_failures(run_dir)
    spent = {r for r, (_, failed) in before.items() if failed >= 1}
    asked_again = set(before) - spent
    not_asked = {r for r in spent if before[r] == first[r] and first[r][1] < 2}
    # Some of each kind, or the test proves nothing: spent by the lowered budget alone (the
    # first run's last attempt did not say so), and left for the same command to ask.
    assert not_asked and asked_again, before
    totals = run_audit(run_dir).totals
    assert (totals.given_up_total, totals.answer_budget_spent) == (len(before), len(spent))
    # What the audit promises is what the same command then does.
    CliRunner().invoke(app, ["run", str(_faulty_spec(tmp_path, 1)), "--out", str(run_dir)])
    after = _unanswered_failures(run_dir)
    assert {r for r in before if after.get(r, (0, 0))[0] != before[r][0]} == asked_again


def test_no_resume_is_promised_where_it_is_refused(tmp_path: Path) -> None:
    """A lenient run reparsed strict: running the same command again is refused (the
    audit's last line says why), so the line over the table promises it nothing."""
    run_dir = _run_with_server_errors(tmp_path, parser="lenient", model="sim-fraction")
    strict = CliRunner().invoke(app, ["reparse", str(run_dir), "--parser", "strict"])
    assert strict.exit_code == 0, strict.output
    shown = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "is refused" in shown.output, shown.output
    assert "asks them again" not in shown.output and "asks it again" not in shown.output


def test_audit_of_a_run_that_died_while_planning_says_so(tmp_path: Path) -> None:
    """A run killed while it planned leaves a spec and no plan: `audit` said "No retry
    attempts: every attempt was accepted (0 requests)." where `status` says the run died
    while planning. Both say the same line now, the table and the --json object alike."""
    import subprocess
    import sys

    (tmp_path / "spec.toml").write_text('name = "x"\n')
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "run.pid").write_bytes(
        orjson.dumps({"pid": gone.pid, "create_time": 0.0, "host": "here"})
    )
    said = "no plan: the run died while planning; run the same command again to plan and start"
    status = CliRunner().invoke(app, ["status", str(tmp_path)], env={"COLUMNS": "240"})
    assert status.output.strip().splitlines()[-1] == said
    table = CliRunner().invoke(app, ["audit", str(tmp_path)], env={"COLUMNS": "240"})
    assert table.exit_code == 0, table.output
    assert table.output.strip().splitlines()[-1] == said
    assert "every attempt was accepted" not in table.output
    as_json = CliRunner().invoke(app, ["audit", str(tmp_path), "--json"])
    assert orjson.loads(as_json.output)["sentence"] == said


#: A priced model, which a low --max-cost stops, and an unpriced one.
CAP_SPEC = (
    'name = "cap"\n[data]\nstock_days = 2\n[[models]]\nname = "m"\nprovider = "sim"\n'
    'model = "sim-coherent"\nprice_in = 1.0\nprice_out = 2.0\nprice_date = "2026-12-01"\n'
    'price_source = "test"\n[[models]]\nname = "free"\nprovider = "sim"\n'
    'model = "sim-noisy"\n[[arms]]\nname = "baseline"\n'
)  # fmt: skip


def test_after_a_spend_cap_the_audit_asks_for_a_higher_cap_as_the_next_run_needs(
    tmp_path: Path,
) -> None:
    """A priced model the cap stopped, an unpriced one done: the audit and the report said
    "running the same command again asks only the unanswered requests", and the same command
    then asked none of them."""
    spec = tmp_path / "cap.toml"
    spec.write_text(CAP_SPEC, encoding="utf-8")
    run_dir = tmp_path / "run"
    command = ["run", str(spec), "--out", str(run_dir), "--max-cost", "0.03"]
    first = CliRunner().invoke(app, command)
    assert "spend cap reached" in first.output, first.output
    shown = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "300"})
    resume = (
        "Running the same command again with a higher --max-cost (the cap counts what earlier "
        "runs spent: under the same cap, little or nothing more is asked) asks only the "
        "unanswered requests."
    )
    assert resume in shown.output, shown.output
    assert f"- {resume}" in (run_dir / "report" / "report.md").read_text(encoding="utf-8")
    # `status` says the command with it (it said `dutchbook run SPEC --out DIR`, which asks
    # nothing more under the same cap, and, with no --max-cost at all, holds to none).
    status = orjson.loads(CliRunner().invoke(app, ["status", str(run_dir), "--json"]).output)
    assert status["resume_command"].startswith(
        f"`dutchbook run SPEC --out {run_dir} --max-cost USD` resumes it, SPEC the spec it was "
        "started with, USD above the cap that stopped it"
    ), status["resume_command"]
    # What it says is what the same command does: nothing more of the priced model.
    from runs.audit import run_audit

    before = run_audit(run_dir).by_model["m"]
    assert before.accepted < before.requests, "nothing left unanswered: the test proves nothing"
    CliRunner().invoke(app, command)
    assert run_audit(run_dir).by_model["m"].attempts == before.attempts


@pytest.mark.parametrize(
    ("settings", "budget"),
    [
        ("", 3),  # the defaults
        ("max_attempts = 2\n", 2),  # the default budget, at most max_attempts
        ("max_attempts = 4\nmax_answer_failures = 2\n", 2),
        ("max_attempts = 4\nmax_answer_failures = 9\n", None),  # refused by the spec's rules
        ("max_answer_failures = 0\n", None),
        ("max_answer_failures = true\n", None),
        ('max_answer_failures = "2"\n', None),
        ("max_attempts = 0\n", None),
    ],
)
def test_the_budget_the_audit_counts_by_is_the_frozen_specs_or_none(
    tmp_path: Path, settings: str, budget: int | None
) -> None:
    """A frozen spec edited by hand: a budget above max_attempts was taken as max_attempts
    by the audit, while `report` refused the same spec."""
    from runs.audit import _answer_budget_of, _frozen_spec

    (tmp_path / "spec.toml").write_text(f'name = "x"\n{settings}', encoding="utf-8")
    assert _answer_budget_of(_frozen_spec(tmp_path)) == budget


#: `dutchbook run ARGS` killed (SIGKILL) as it records its second answer, its lanes never
#: written: as a resume killed in its dispatch's first second leaves `logs/lanes.json`.
KILLED_RESUME = """
import os, signal, sys
import engine.lanefile, engine.ledger
engine.lanefile.LaneFileWriter.write = lambda self, lanes: None
recorded, seen = engine.ledger.Ledger.record_result, []
def record_result(self, attempt, response):
    done = recorded(self, attempt, response)
    seen.append(attempt)
    if len(seen) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return done
engine.ledger.Ledger.record_result = record_result
from runs.entry import main
sys.argv = ["dutchbook", *sys.argv[1:]]
main()
"""


def test_lanes_a_killed_resume_never_wrote_are_said_to_be_an_earlier_runs(
    tmp_path: Path,
) -> None:
    """A resume given a higher --max-cost, killed before it wrote `logs/lanes.json`: the
    audit read the file the capped run before it left as the resume's, and said each lane
    "was stopped (spend cap reached: $0.0027 of $0.0200 ...)", and to raise --max-cost. It
    says the file is an earlier run's, and names no lane as ended early."""
    import signal
    import subprocess
    import sys

    from runs.audit import run_audit

    spec = tmp_path / "cap.toml"
    spec.write_text(CAP_SPEC, encoding="utf-8")
    run_dir = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(spec), "--out", str(run_dir), "--max-cost", "0.02"])
    first = run_audit(run_dir)
    assert "spend cap reached: $" in "\n".join(first.notes())  # the capped run's lanes
    said = orjson.loads(CliRunner().invoke(app, ["status", str(run_dir), "--json"]).output)
    assert said["lanes_of_earlier_run"] is None  # its own run's file
    written = (run_dir / "logs" / "lanes.json").read_bytes()
    resume = ["run", str(spec), "--out", str(run_dir), "--max-cost", "100"]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_RESUME, *resume], capture_output=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (run_dir / "logs" / "lanes.json").read_bytes() == written  # the capped run's
    assert run_audit(run_dir).totals.attempts > first.totals.attempts  # the resume sent some
    shown = CliRunner().invoke(app, ["audit", str(run_dir)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert "spend cap reached" not in shown.output and "--max-cost" not in shown.output
    assert "logs/lanes.json is of an earlier run (last written at " in shown.output
    as_json = orjson.loads(CliRunner().invoke(app, ["audit", str(run_dir), "--json"]).output)
    assert as_json["lanes_ended_early"] == []
    assert as_json["lanes_of_earlier_run"]["lanes_ended_early"] == first.lane_ends
    # `status` read the file's lane reasons as the resume's too ("spend cap reached"), and
    # its own check (`lanes_behind_s`) warns only of a file over 10 s behind: it asks as
    # the audit does.
    said = orjson.loads(CliRunner().invoke(app, ["status", str(run_dir), "--json"]).output)
    assert said["lanes_of_earlier_run"] == {
        key: as_json["lanes_of_earlier_run"][key] for key in ("updated_at", "run_started_at")
    }
    shown = CliRunner().invoke(app, ["status", str(run_dir)], env={"COLUMNS": "300"})
    assert "spend cap reached" not in shown.output, shown.output
    assert "warning: logs/lanes.json is of an earlier run (last written at " in shown.output
