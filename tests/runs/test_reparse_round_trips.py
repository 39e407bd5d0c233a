"""What `status`, `run`, `audit` and `report` say of a folder that `dutchbook reparse` took to
strict and back, or left unfinished.

Found by a review of reparse round trips: after `reparse --parser strict` of a lenient run,
`status` counted the answers strict rejected as pending failures and said nothing of the
reparse that takes them back, though a resume of the lenient spec is refused until it runs.
A reparse stopped after its begun line (a full disk, a kill) was said only by the report's
provenance ("run it again", no command) and by the resume's refusal, which offered to keep
strict's answers by scoring them though they might not be strict's; `status` and `audit`
said nothing.
"""

from __future__ import annotations

import errno
import html
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import engine.durable
import engine.reparse
import runs.repair_step
import runs.scored_from
from engine.audit import attempt_timeline
from engine.journal import JournalWriter, segment_path
from engine.lanefile import write_lane_states
from engine.lanes import LaneState, LaneStats
from engine.ledger import Ledger
from engine.records import iso_utc
from engine.reparse import last_reparse, lost_after_reparse
from engine.scan import scan_attempts, scan_responses
from engine.shards import shard_name
from runs.audit import run_audit, summary_rows
from runs.scored_from import stale_repairs
from tests.runs.quiet_campaign import invoke
from tests.runs.run_folders import FinishedRuns

#: A model whose fractions ("11/36") strict rejects and lenient takes, and one that answers
#: plainly: a lenient run answers all 56, a strict reparse leaves 28.
SPEC = """
name = "round-trip"
seed = 3
parser = "lenient"
[data]
stock_days = 2
[[models]]
name = "fractions"
provider = "sim"
model = "sim-fraction"
[[models]]
name = "plain"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


@pytest.fixture
def root(finished_runs: FinishedRuns, tmp_path: Path) -> Path:
    """A copy of the finished lenient run (`run/`), its spec beside it: run once a session,
    for every worker (`tests/runs/conftest.py`)."""
    (tmp_path / "spec.toml").write_text(SPEC, encoding="utf-8")
    assert finished_runs.copy_to(tmp_path / "run", SPEC) == 0
    return tmp_path


def test_status_after_a_strict_reparse_names_the_reparse_that_takes_them_back(
    root: Path,
) -> None:
    out = root / "run"
    code, said = invoke("reparse", str(out), "--parser", "strict")
    assert code == 0 and "accepted 56 → 28" in said, said
    line = (
        "28 requests have no answer only because `dutchbook reparse --parser strict` rejected "
        f"the replies the run had accepted: `dutchbook reparse {out} --parser lenient` takes "
        "them back without a call (a resume with a lenient spec is refused until then)"
    )
    code, said = invoke("status", str(out))
    assert code == 0 and line in said.splitlines(), said
    code, said = invoke("status", str(out), "--json")
    summary = json.loads(said)
    assert summary["answers_rejected_on_reparse"] == 28
    assert summary["notes"] == [line]
    assert summary["pending_failures"]["total"] == 28  # as before: still pending
    # The scores are of the answers before the reparse, until `score` runs.
    stale = "scores.parquet and report/ are out of date"
    assert [w.split(" (")[0] for w in summary["warnings"]] == [stale]

    code, said = invoke("run", str(root / "spec.toml"), "--out", str(out))
    assert code == 2 and f"`dutchbook reparse {out} --parser lenient`" in said, said
    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0  # as the line says
    code, said = invoke("status", str(out), "--json")
    summary = json.loads(said)
    assert summary["answers_rejected_on_reparse"] == 0 and summary["notes"] == []
    assert summary["accepted"] == 56
    assert invoke("run", str(root / "spec.toml"), "--out", str(out))[0] == 0


def test_status_and_audit_tell_one_story_of_the_answers_a_strict_reparse_rejected(
    root: Path,
) -> None:
    """The audit counted the 28 replies strict rejected as 28 invalid-response retry
    attempts, their requests given up, while status listed them as failed, 0 permanent: the
    run had accepted them and asked nothing more. Neither command calls them retries or
    failures now; both count them (`answers_rejected_on_reparse`), say the reparse that
    takes them back, and end on the same sentence; figure 8's timeline shows them apart."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    line = (
        "28 requests have no answer only because `dutchbook reparse --parser strict` rejected "
        f"the replies the run had accepted: `dutchbook reparse {out} --parser lenient` takes "
        "them back without a call (a resume with a lenient spec is refused until then)"
    )
    sentence = (
        "No retry attempts (56 requests); 28 replies the run accepted were rejected by "
        "`dutchbook reparse --parser strict`, not retried."
    )
    summary = json.loads(invoke("status", str(out), "--json")[1])
    assert (summary["retries"], summary["requests_retried"], summary["retries_by_cause"]) == (
        0, 0, {},
    )
    assert summary["models"]["fractions"]["answers_rejected_on_reparse"] == 28
    assert summary["sentence"] == sentence
    report = json.loads(invoke("audit", str(out), "--json")[1])
    totals = report["totals"]
    assert (totals["retry_attempts"], totals["requests_retried"]) == (0, 0)
    assert sum(totals["given_up"].values()) == 0
    assert totals["answers_rejected_on_reparse"] == 28
    assert report["by_model"]["fractions"]["answers_rejected_on_reparse"] == 28
    assert report["sentence"] == sentence

    code, said = invoke("status", str(out))
    assert code == 0 and "0 retry attempts across 0 requests" in said, said
    assert "failed and" not in said and line in said.splitlines(), said
    code, said = invoke("audit", str(out))
    assert code == 0 and f"{line}." in said.splitlines(), said
    assert "invalid responses" not in said and said.rstrip().endswith(sentence), said

    timeline = attempt_timeline(out).group_by("outcome").agg(pl.col("attempts").sum())
    assert dict(timeline.iter_rows()) == {"accepted": 28, "rejected_on_reparse": 28}


def test_status_counts_no_duplicate_for_a_reply_a_strict_reparse_rejected(root: Path) -> None:
    """After a strict reparse, status said 28 duplicate ok attempts (every `ok` attempt less
    the answers), where the audit counts no duplicate answer: the 28 replies strict rejected
    are the ones the run accepted, not duplicates. Status counts them as the audit does."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    summary = json.loads(invoke("status", str(out), "--json")[1])
    report = json.loads(invoke("audit", str(out), "--json")[1])
    assert summary["outcomes"]["ok"] == 56 and summary["accepted"] == 28
    assert summary["duplicate_ok_attempts"] == report["totals"]["retries_by_cause"]["duplicate"]
    assert summary["duplicate_ok_attempts"] == 0


def test_the_audit_table_of_a_strictly_reparsed_folder_adds_up(root: Path) -> None:
    """`report/audit.csv` had no column for the requests a strict reparse left without an
    answer: its row of 56 requests read 28 accepted, none given up, none unasked."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    assert invoke("score", str(out))[0] == 0
    assert invoke("report", str(out))[0] == 0  # writes report/audit.csv afresh
    table = pl.read_csv(out / "report" / "audit.csv").filter(pl.col("scope") == "all")
    row = table.row(0, named=True)
    assert (row["requests"], row["accepted"], row["answers_rejected_on_reparse"]) == (56, 28, 28)
    parts = ("accepted", "given_up", "not_attempted", "answers_missing",
             "answers_rejected_on_reparse")  # fmt: skip
    assert sum(row[part] for part in parts) == row["requests"]
    assert table.columns[-8:] == [  # added last: the columns before keep their places
        "answers_missing", "answers_rejected_on_reparse", "answer_budget_spent",
        "answers_unrecorded", "lost_to_damage", "billed_unread", "billed_unread_cost_usd",
        "simulated",
    ]  # fmt: skip


def _page_audit_table(page: Path) -> list[dict[str, str]]:
    """The rows of the report page's "Retries and failures" table, by header."""
    text = page.read_text("utf-8").split("<h2>Retries and failures</h2>", 1)[1]
    table = text.split("<table", 1)[1].split("</table>", 1)[0]
    rows = [
        [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
         for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        for row in re.findall(r"<tr.*?</tr>", table, re.S)
    ]  # fmt: skip
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def _adds_up(row: dict[str, str], parts: Iterable[str]) -> bool:
    def number(header: str) -> int:
        return int(row.get(header, "0").replace(",", ""))

    return sum(number(part) for part in parts) == number("requests")


def test_the_pages_and_the_audits_tables_of_a_strictly_reparsed_folder_add_up(
    root: Path,
) -> None:
    """After a strict reparse the report page's "Retries and failures" row read "56
    requests, 28 accepted, given up 0", and so did `dutchbook audit`'s table: the 28
    answers rejected on reparse were said only in a note under it. They have a column now,
    where any row has some, and a folder without has none."""
    out = root / "run"
    parts = ("accepted", "given up", "not attempted", "answers missing", "rejected on reparse")
    before = _page_audit_table(out / "report" / "index.html")
    assert "rejected on reparse" not in before[0] and "answers missing" not in before[0]
    assert all(_adds_up(row, parts) for row in before), before
    header, _ = summary_rows(run_audit(out))
    assert header[-1] == "given up"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    assert invoke("score", str(out))[0] == 0
    assert invoke("report", str(out))[0] == 0
    after = _page_audit_table(out / "report" / "index.html")
    assert [row["rejected on reparse"] for row in after] == ["28", "0", "28"], after
    assert all(_adds_up(row, parts) for row in after), after
    header, cells = summary_rows(run_audit(out))
    assert header[-1] == "rejected on reparse"
    assert all(_adds_up(dict(zip(header, row, strict=True)), parts) for row in cells), cells


def _fail_reparse(
    out: Path, where: str, monkeypatch: pytest.MonkeyPatch, parser: str = "strict"
) -> None:
    """`dutchbook reparse OUT --parser PARSER` stopped after its begun line: by a full disk
    before its answers replace the folder's, or by a kill just after."""
    replace = Ledger.replace_responses

    def full(self: Ledger, frame: pl.DataFrame) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    def killed(self: Ledger, frame: pl.DataFrame) -> Path:
        replace(self, frame)
        raise KeyboardInterrupt

    monkeypatch.setattr(Ledger, "replace_responses", full if where == "before" else killed)
    code, said = invoke("reparse", str(out), "--parser", parser)
    assert code == (6 if where == "before" else 130), said
    assert "run the same command again" in said, said
    monkeypatch.undo()
    assert last_reparse(out) is not None and not last_reparse(out).finished  # type: ignore[union-attr]


@pytest.mark.parametrize("where", ["before", "after"])
def test_every_command_names_the_reparse_that_did_not_finish(
    root: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, spec = root / "run", str(root / "spec.toml")
    _fail_reparse(out, where, monkeypatch)
    again = f"run `dutchbook reparse {out} --parser strict` again (no API call; it rebuilds them"

    def lines(said: str) -> list[str]:
        return [line for line in said.splitlines() if again in line]

    code, said = invoke("status", str(out))
    assert code == 0 and len(lines(said)) == 1 and lines(said)[0].startswith("warning: a `"), said
    assert "takes them back" not in said  # one thing to do, not two
    summary = json.loads(invoke("status", str(out), "--json")[1])
    assert summary["reparse_unfinished"] is True and summary["notes"] == []
    code, said = invoke("audit", str(out))
    assert code == 0 and len(lines(said)) == 1, said
    audit_json = json.loads(invoke("audit", str(out), "--json")[1])
    assert again in audit_json["reparse_unfinished"]

    attempts = scan_attempts(out).collect().height
    code, said = invoke("run", spec, "--out", str(out))
    assert code == 2, said
    assert f"run `dutchbook reparse {out} --parser lenient` first (no API call)" in said
    assert f"or run `dutchbook reparse {out} --parser strict` again to finish it" in said
    assert "keep strict's answers without resuming (`dutchbook score" not in said  # unknown
    assert scan_attempts(out).collect().height == attempts  # nothing asked again

    code, said = invoke("report", str(out))
    if where == "before":  # the answers scored are the folder's: reported, and said
        assert code == 0 and len(lines(said)) == 1, said
    else:  # strict's answers are in: not scored, and not to be scored before the reparse
        assert code == 2 and len(lines(said)) == 1, said
        assert said.rstrip().endswith(f"then `dutchbook score {out}`, then this command"), said

    for command in ("score", "repair"):  # they work on the answers as they are, and say it
        code, said = invoke(command, str(out))
        assert code == 0 and len(lines(said)) == 1 and lines(said)[0].startswith("warning: ")

    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0  # as every line says
    assert last_reparse(out).finished  # type: ignore[union-attr]
    code, said = invoke("status", str(out))
    assert code == 0 and not lines(said) and "takes them back without a call" in said, said
    assert scan_responses(out).collect().height == 28  # strict's answers, nothing lost
    assert scan_attempts(out).collect().height == attempts


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_unfinished_lenient_reparse_is_one_line_not_two(
    root: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lenient reparse back from strict, stopped before its answers replaced strict's,
    left strict's rejections read as answers lost from responses/ (lenient was the parser
    in force): `status` warned twice and the audit noted twice, each line naming the same
    `dutchbook reparse DIR --parser lenient`. The unfinished reparse's line is the one."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    _fail_reparse(out, where, monkeypatch, parser="lenient")
    command = f"`dutchbook reparse {out} --parser lenient`"
    code, said = invoke("status", str(out))
    assert code == 0 and said.count(command) == 1, said
    assert "did not finish" in said and "missing from responses/" not in said, said
    summary = json.loads(invoke("status", str(out), "--json")[1])
    assert len(summary["warnings"]) == 1 and summary["reparse_unfinished"] is True
    # Strict's rejections, not lost answers: the answers may still be strict's.
    assert summary["answers_missing"] == 0
    assert summary["answers_rejected_on_reparse"] == (28 if where == "before" else 0)
    code, said = invoke("audit", str(out))
    assert code == 0 and said.count(command) == 1, said

    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0  # as the line says
    summary = json.loads(invoke("status", str(out), "--json")[1])
    assert summary["warnings"] == [] and summary["accepted"] == 56


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_unfinished_lenient_reparse_leaves_strict_rejections_rejected_not_lost(
    root: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lenient reparse back from strict, stopped before its answers replaced strict's: the
    28 replies strict rejected were counted by `status --json` and the audit as answers lost
    from responses/ (`answers_missing` 28, `answers_rejected_on_reparse` 0), and both
    sentences said "every attempt was accepted" of 28 answers of 56, lenient being taken for
    the parser in force though the answers may still be strict's. They are rejected on
    reparse in both. The resume, which only the lost answers' refusal stopped, is still
    refused before a request is sent; after the replacement there is nothing to count."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    _fail_reparse(out, where, monkeypatch, parser="lenient")
    rejected = 28 if where == "before" else 0
    summary = json.loads(invoke("status", str(out), "--json")[1])
    report = json.loads(invoke("audit", str(out), "--json")[1])
    for counts in (summary, report["totals"]):
        assert (
            counts["accepted"], counts["answers_missing"], counts["answers_rejected_on_reparse"]
        ) == (56 - rejected, 0, rejected), counts
    assert (summary["pending_failures"]["total"], summary["pending_failures"]["failed"]) == (
        rejected, 0,
    )
    assert sum(report["totals"]["given_up"].values()) == 0
    assert summary["sentence"] == report["sentence"] == (
        "No retry attempts (56 requests); 28 replies the run accepted were rejected by "
        "`dutchbook reparse --parser strict`, not retried."
        if rejected
        else "No retry attempts: every attempt was accepted (56 requests)."
    )

    attempts = scan_attempts(out).collect().height
    code, said = invoke("run", str(root / "spec.toml"), "--out", str(out))
    assert code == 2, said
    assert f"run `dutchbook reparse {out} --parser lenient` again first (no API call)" in said
    assert scan_attempts(out).collect().height == attempts  # nothing asked again
    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0  # as the refusal says
    assert invoke("run", str(root / "spec.toml"), "--out", str(out))[0] == 0
    assert scan_attempts(out).collect().height == attempts


def test_the_audit_promises_no_resume_that_would_be_refused(root: Path) -> None:
    """After `reparse --parser strict` of the lenient run, a lane that had ended early made
    the audit close on "Running the same command again asks only the unanswered requests",
    and running it was refused (the folder may hold strict's answers, the spec is lenient).
    The audit says that the resume is refused, in the refusal's own words, with what to do."""
    out, spec = root / "run", str(root / "spec.toml")
    lane = LaneStats("fractions", "sim", state=LaneState.CANCELLED)
    lane.say("stop requested")
    write_lane_states(out, [lane, LaneStats("plain", "sim", state=LaneState.DONE)])
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    attempts = scan_attempts(out).collect().height
    code, refused = invoke("run", spec, "--out", str(out))
    assert code == 2 and refused.startswith(f"error: {out}: "), refused
    assert scan_attempts(out).collect().height == attempts
    why = refused.removeprefix(f"error: {out}: ").rstrip("\n").replace("this spec", "its spec")

    code, said = invoke("audit", str(out))
    assert code == 0, said
    assert "asks only the unanswered requests" not in said, said
    assert "fractions (sim): 28 of 28 requests unanswered; its lane was stopped" in said, said
    assert f"Running the same command again is refused: {why}." in said.splitlines(), said
    assert f"run `dutchbook reparse {out} --parser lenient` first (no API call)" in why
    notes = run_audit(out).notes()
    assert notes[-1] == f"Running the same command again is refused: {why}."


def _refusal(root: Path) -> str:
    """The words `dutchbook run` refuses a resume of `root/run` in, as the audit says them
    (of "its spec"); nothing is asked."""
    out = root / "run"
    attempts = scan_attempts(out).collect().height
    code, refused = invoke("run", str(root / "spec.toml"), "--out", str(out))
    assert code == 2 and refused.startswith(f"error: {out}: "), refused
    assert scan_attempts(out).collect().height == attempts
    return refused.removeprefix(f"error: {out}: ").rstrip("\n").replace("this spec", "its spec")


def test_the_audit_names_the_reparse_back_to_lenient_once(root: Path) -> None:
    """After `reparse --parser strict` of the lenient run with a lane that had ended early,
    the audit named `dutchbook reparse DIR --parser lenient` twice: in the line on the
    replies strict rejected, and in the resume's refusal after the lane's line. The refusal
    names it, with why the resume waits for it and the other way out; the line keeps that a
    lenient reparse gives the answers back without a call. `status`, which says no
    refusal, keeps the command in its line."""
    out = root / "run"
    lane = LaneStats("fractions", "sim", state=LaneState.CANCELLED)
    lane.say("stop requested")
    write_lane_states(out, [lane, LaneStats("plain", "sim", state=LaneState.DONE)])
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    why = _refusal(root)
    command = f"`dutchbook reparse {out} --parser lenient`"

    code, said = invoke("audit", str(out))
    assert code == 0 and said.count(command) == 1, said
    assert run_audit(out).notes() == [
        "28 requests have no answer only because `dutchbook reparse --parser strict` rejected "
        "the replies the run had accepted; a lenient reparse gives their answers back without "
        "a call.",
        "fractions (sim): 28 of 28 requests unanswered; its lane was stopped (stop requested).",
        f"Running the same command again is refused: {why}.",
    ]
    assert command in why
    code, said = invoke("status", str(out))
    assert code == 0 and said.count(command) == 1, said
    assert f"{command} takes them back without a call" in said, said


def test_the_audit_promises_no_resume_for_a_spent_budget_that_would_be_refused(
    tmp_path: Path,
) -> None:
    """A lenient run with requests given up with their answer-failure budget spent, then
    reparsed strict: the audit said of them "running the same command again asks them only
    once the spec's max_answer_failures is raised", where running it is refused with the
    budget raised or not. The budget lines say what a resume asks, and the resume's refusal
    follows them, in the run's own words, naming the reparse back to lenient once."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.replace(
            'parser = "lenient"\n',
            'parser = "lenient"\nmax_answer_failures = 1\nsim_faults = "refusal=0.3"\n',
        ),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code, said = invoke("run", str(spec), "--out", str(out))
    assert code == 4 and "spent their answer-failure budget" in said, said
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    why = _refusal(tmp_path)
    # With the budget raised, as the line said, the resume is refused all the same.
    spec.write_text(spec.read_text().replace("max_answer_failures = 1", "max_answer_failures = 2"))
    assert _refusal(tmp_path) == why

    notes = run_audit(out).notes()
    budget = [note for note in notes if "answer-failure budget spent" in note]
    assert budget, notes
    for note in budget:
        assert note.endswith(
            "; a resume asks them again only once the spec's max_answer_failures is raised."
        ), note
    assert not any("running the same command again asks" in note for note in notes), notes
    assert notes[-1] == f"Running the same command again is refused: {why}."
    code, said = invoke("audit", str(out))
    assert code == 0 and said.count(f"`dutchbook reparse {out} --parser lenient`") == 1, said


def test_audit_json_says_whether_a_resume_is_refused(root: Path) -> None:
    """`audit --json` (and `report/audit.json`, the same object) did not say that a resume
    of the folder is refused: `resume_refused` is the refusal's words (of "its spec"), or
    null, whether or not a note says them (no lane ended early here)."""
    from runs.audit import AUDIT_JSON, write_files

    out = root / "run"
    assert json.loads(invoke("audit", str(out), "--json")[1])["resume_refused"] is None
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    why = _refusal(root)
    assert json.loads(invoke("audit", str(out), "--json")[1])["resume_refused"] == why
    write_files(out, run_audit(out))
    assert json.loads((out / AUDIT_JSON).read_bytes())["resume_refused"] == why
    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0
    assert json.loads(invoke("audit", str(out), "--json")[1])["resume_refused"] is None


def test_a_reparse_back_to_the_answers_scored_leaves_the_scores_standing(root: Path) -> None:
    """`reparse --parser strict`, then `--parser lenient`: the answers are those the run
    scored, in a new shard; the report used to ask for a new score. A real change still
    does: strict's answers scored, then lenient's back, are not what was scored."""
    out = root / "run"
    stale = "its answers changed after it was scored"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    code, said = invoke("report", str(out))
    assert code == 2 and stale in said, said  # strict's answers are not what was scored
    code, said = invoke("reparse", str(out), "--parser", "lenient")
    assert code == 0 and "no new score is needed" in said and "dutchbook score" not in said, said
    code, said = invoke("report", str(out))
    assert code == 0 and stale not in said, said

    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    assert invoke("score", str(out))[0] == 0  # the scores are strict's now
    assert invoke("report", str(out))[0] == 0
    code, said = invoke("reparse", str(out), "--parser", "lenient")
    assert code == 0 and f"run `dutchbook score {out}`" in said, said
    code, said = invoke("report", str(out))
    assert code == 2 and stale in said, said
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0  # strict's again
    code, said = invoke("report", str(out))
    assert code == 0, said


def _reparsed(root: Path, state: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The lenient round-trip run reparsed into `state`: `strict` (finished), `strict-stopped`
    (the first reparse, strict, stopped after replacing the answers), `back-before` and
    `back-after` (strict, then a lenient reparse back stopped before or after replacing
    them). The parser of the reparse that rebuilds the folder's answers is returned."""
    out = root / "run"
    if state == "strict-stopped":
        _fail_reparse(out, "after", monkeypatch)
        return "strict"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    if state == "strict":
        return "strict"
    _fail_reparse(out, state.removeprefix("back-"), monkeypatch, parser="lenient")
    return "lenient"


def _lose_answers(out: Path, kept: int) -> None:
    """The answers' shards of `out` deleted, and `kept` of strict's put back in one shard
    (strict's first: a lenient reparse's may hold them all)."""
    held = scan_responses(out).collect()
    for shard in (out / "responses").glob("part-*.parquet"):
        shard.unlink()
    if kept:
        plain = held.filter(pl.col("model") == "plain").sort("request_id").head(kept)
        plain.write_parquet(out / "responses" / shard_name(999))


@pytest.mark.parametrize("state", ["strict", "strict-stopped", "back-before", "back-after"])
@pytest.mark.parametrize("kept", [0, 10])
def test_answers_lost_after_a_strict_reparse_are_lost_not_rejected(
    root: Path, state: str, kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lenient run reparsed strict (then, say, a lenient reparse back stopped on the way),
    its answers' shard deleted: `score` said "scored 0 answered sets", exit 0, over the
    scores, and `repair` the same, and `status` and the audit counted the lost answers as
    replies strict rejected, since after a strict reparse a reply recorded `ok` with no
    answer is mostly one. The folder holds fewer answers than the reparse left (its lines
    say how many), so the replies strict's parser takes are lost answers: counted so by
    both, and refused by both commands, the files left as they were; strict's own
    rejections are still rejections. With 10 of 28 strict answers kept (a shard cut short),
    the 18 others."""
    out = root / "run"
    parser = _reparsed(root, state, monkeypatch)
    _lose_answers(out, kept)
    missing = 28 - kept
    summary = json.loads(invoke("status", str(out), "--json")[1])
    report = json.loads(invoke("audit", str(out), "--json")[1])
    for counts in (summary, report["totals"]):
        assert (
            counts["accepted"], counts["answers_missing"], counts["answers_rejected_on_reparse"]
        ) == (kept, missing, 28), counts
    assert summary["models"]["plain"]["answers_rejected_on_reparse"] == 0
    assert report["by_model"]["plain"]["answers_missing"] == missing

    rebuild = f"run `dutchbook reparse {out} --parser {parser}` first, which rebuilds them"
    for command, output in (("score", "scores.parquet"), ("repair", "repaired.parquet")):
        before = (out / output).read_bytes() if (out / output).exists() else None
        code, said = invoke(command, str(out))
        assert code == 2 and f"{missing} accepted answers are missing" in said, said
        assert rebuild in said, said
        assert ((out / output).read_bytes() if (out / output).exists() else None) == before

    assert invoke("reparse", str(out), "--parser", parser)[0] == 0  # as the refusal says
    summary = json.loads(invoke("status", str(out), "--json")[1])
    assert summary["answers_missing"] == 0 and summary["accepted"] in (28, 56)
    assert invoke("score", str(out))[0] == 0


@pytest.mark.parametrize("state", ["strict", "back-before"])
def test_figure_8_draws_answers_lost_after_a_strict_reparse_as_accepted(
    root: Path, state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figure 8's `attempt_timeline` read every reply recorded `ok` with no answer after a
    strict reparse as one strict rejected, the 18 answers lost from responses/ too, where
    `status` and the audit count them lost (`engine.reparse.lost_after_reparse`): it drew
    46 replies rejected on reparse and 10 accepted (unseen through `report`, which refuses
    such a folder first). It reads them as `status` and the audit do: the accepted
    attempts they were, strict's 28 rejections still rejections."""
    out = root / "run"
    _reparsed(root, state, monkeypatch)
    _lose_answers(out, 10)
    timeline = attempt_timeline(out).group_by("outcome").agg(pl.col("attempts").sum())
    assert dict(timeline.iter_rows()) == {"accepted": 28, "rejected_on_reparse": 28}


def test_a_reparse_says_how_many_answers_it_found_and_leaves_before_it_replaces_them(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its begun line: whichever of the two the folder holds if it stops on the way."""
    from engine.reparse import read_reparses

    _fail_reparse(root / "run", "before", monkeypatch)
    line = read_reparses(root / "run")[-1]
    assert (line["begun"], line["accepted_before"], line["accepted_after"]) == (True, 56, 28)


def _lane_stopped(out: Path) -> None:
    """`logs/lanes.json` of a dispatch whose `fractions` lane was stopped."""
    lane = LaneStats("fractions", "sim", state=LaneState.CANCELLED)
    lane.say("stop requested")
    write_lane_states(out, [lane, LaneStats("plain", "sim", state=LaneState.DONE)])


@pytest.mark.parametrize("parser", ["strict", "lenient"])
def test_the_audit_calls_a_reparse_still_running_running_in_its_refusal_too(
    root: Path, parser: str, request: pytest.FixtureRequest
) -> None:
    """A reparse running now (the folder's live writer, its begun line the last) is not
    called unfinished by `unfinished_line`, yet the resume's refusal, the audit's last note
    and `audit --json`'s `resume_refused` said it "did not finish" and to run it "again".
    They say it is still running, and what to do once it has finished."""
    from datetime import UTC, datetime

    from engine.durable import append_record_line
    from engine.reparse import REPARSES_FILE, unfinished_line
    from engine.runlock import acquire_lock, clear_pid, release_lock, write_pid

    out = root / "run"
    _lane_stopped(out)
    # Strict's answers, then a reparse running: strict again, or lenient back from it.
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    now = datetime.now(UTC).isoformat(timespec="seconds")
    append_record_line(out / REPARSES_FILE, {"at": now, "parser": parser, "begun": True})
    assert unfinished_line(out) is not None  # no process holds the ledger: it stopped
    # The reparse's writer: the ledger's lock held (on its own descriptor), no pid file.
    held = acquire_lock(out, out / "journal")
    request.addfinalizer(lambda: release_lock(held))
    assert unfinished_line(out) is None
    write_pid(out)  # a live run holding it instead: the reparse is not running, it stopped
    assert unfinished_line(out) is not None
    clear_pid(out)

    notes = run_audit(out).notes()
    assert not any("did not finish" in note or " again first" in note for note in notes), notes
    assert notes[-1].startswith("Running the same command again is refused: "), notes
    running = f"`dutchbook reparse --parser {parser}` begun{' after it' * (parser == 'lenient')}"
    assert f"{running} at {now} is still running" in notes[-1], notes[-1]
    assert f"--parser {parser}` again" not in notes[-1]
    refused = json.loads(invoke("audit", str(out), "--json")[1])["resume_refused"]
    assert f"{refused}." == notes[-1].removeprefix("Running the same command again is refused: ")


@pytest.mark.parametrize("parser", ["strict", "lenient"])
def test_the_audit_names_the_reparse_that_did_not_finish_once_and_the_same_way(
    root: Path, parser: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a reparse that did not finish and a lane that ended early, the audit named the
    same `dutchbook reparse DIR --parser P` in its first note (run it again) and in the
    resume's refusal, its last; and after a strict one, the first said to run strict again
    where the last offered "lenient first ... or strict again". The first note names it; the
    last names no command the first does, and says what is left once it has run. `audit
    --json`'s `resume_refused` keeps the run's own words, whole."""
    out = root / "run"
    _lane_stopped(out)
    if parser == "lenient":  # stopped before it replaced strict's answers: 28 unanswered
        assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
        _fail_reparse(out, "before", monkeypatch, parser="lenient")
    else:  # stopped after it replaced the run's answers with strict's
        _fail_reparse(out, "after", monkeypatch)
    why = _refusal(root)
    again = f"`dutchbook reparse {out} --parser {parser}` again"
    lenient = f"`dutchbook reparse {out} --parser lenient`"

    notes = run_audit(out).notes()
    assert again in notes[0] and "did not finish" in notes[0], notes
    assert "fractions (sim): 28 of 28 requests unanswered" in notes[1], notes
    last = notes[-1]
    assert last.startswith("Running the same command again is refused: "), notes
    assert f"--parser {parser}` again" not in last, last
    if parser == "lenient":
        assert "until the reparse back to lenient has been run again" in last, last
        assert "may still be those a strict reparse left" in last, last
    else:
        assert f"once that reparse has been run again, run {lenient} (no API call)" in last
    code, said = invoke("audit", str(out))
    assert code == 0 and said.count(again) == 1, said
    assert said.count(lenient) == 1, said  # in the first note, or else in the last
    assert json.loads(invoke("audit", str(out), "--json")[1])["resume_refused"] == why


def _attempts_in_shards_and_journal(out: Path, shards: int) -> None:
    """The attempts of `out` dealt, row by row, into `shards` shards and a journal segment,
    as a writer stopped between folds leaves them."""
    every = scan_attempts(out).collect()
    for shard in (out / "attempts").glob("part-*.parquet"):
        shard.unlink()
    dealt = every.with_row_index("_n").with_columns(pl.col("_n") % (shards + 1))
    for n in range(shards):
        rows = dealt.filter(pl.col("_n") == n).drop("_n")
        rows.write_parquet(out / "attempts" / shard_name(1000 + n))
    journal = dealt.filter(pl.col("_n") == shards).drop("_n").to_dicts()
    writer = JournalWriter(segment_path(out / "journal", 2000))
    for row in journal:
        row["started_at"] = iso_utc(row["started_at"])
        writer.append({"kind": "result", "attempt": row, "response": None})
    writer.close()
    assert scan_attempts(out).collect().sort("request_id", "attempt").equals(
        every.sort("request_id", "attempt")
    )


def _parts_read(monkeypatch: pytest.MonkeyPatch, bound: list[list[str]]) -> list[int]:
    """`lost_after_reparse`'s parts (read by `_unanswered_taken_by`) counted (their number
    returned, a call's count appended when it ends), and, each time it asks for a part after
    its first, which of its names for the last part's replies it still holds, in `bound`."""
    seen: list[int] = []
    read = engine.reparse._collected_ahead

    def counting(queries: Iterable[pl.LazyFrame]) -> Iterator[pl.DataFrame]:
        n = 0
        for replies in read(queries):
            n += 1
            yield replies
            caller = sys._getframe(1)  # the loop that asks for the next part
            assert caller.f_code.co_name == "_unanswered_taken_by"  # `lost_after_reparse`'s
            held = ("replies", "texts", "keys", "taken")
            bound.append([name for name in held if name in caller.f_locals])
        seen.append(n)

    monkeypatch.setattr(engine.reparse, "_collected_ahead", counting)
    return seen


def test_answers_lost_in_a_folder_of_several_shards_and_a_journal_are_found_part_by_part(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lost_after_reparse` reads the replies a few shards at a time (`_LOST_PART_BYTES`),
    but every folder tested held one part: here its attempts are in three shards and a
    journal, each a part of its own, and it finds the 18 answers lost after a strict
    reparse that one part of them all finds. It lets go of each part's replies before it
    asks for the next: none of its names for them is still bound then."""
    out = root / "run"
    _reparsed(root, "strict", monkeypatch)
    _lose_answers(out, 10)
    _attempts_in_shards_and_journal(out, 3)
    bound: list[list[str]] = []
    seen = _parts_read(monkeypatch, bound)
    whole = lost_after_reparse(out)
    monkeypatch.setattr(engine.reparse, "_LOST_PART_BYTES", 1)
    parts = lost_after_reparse(out)
    assert seen == [2, 4]  # the shards in one part, then the journal; each a part
    assert whole.height == 18 and parts.equals(whole)
    assert bound and all(names == [] for names in bound), bound


def _killed_on_call(number: int) -> Any:
    """A stand-in that lets its first `number - 1` calls through to `real` and ends the
    command at call `number`, as a kill there would (the files before it committed)."""
    calls: list[int] = []

    def wrap(real: Any) -> Any:
        def stand_in(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) == number:
                raise SystemExit(137)
            return real(*args, **kwargs)

        return stand_in

    return wrap


def test_scores_cut_short_after_a_reparse_are_stale_after_a_reparse_back(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hostile pass: strict's answers scored, lenient's reparsed in, a `score` killed after
    its first file was committed (forecasts.parquet lenient's, the rest strict's), then a
    reparse back to strict's: it said "no new score is needed" and every command after it
    read forecasts of answers the folder no longer held as current."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    assert invoke("score", str(out))[0] == 0
    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0
    with monkeypatch.context() as patch:
        real = engine.durable.commit_file

        def killed_at_scores(tmp: Path, target: Path, **kwargs: Any) -> None:
            if target.name == "scores.parquet":  # forecasts.parquet is in place
                raise SystemExit(137)
            real(tmp, target, **kwargs)

        patch.setattr(engine.durable, "commit_file", killed_at_scores)
        assert invoke("score", str(out))[0] == 137
    code, said = invoke("reparse", str(out), "--parser", "strict")
    assert code == 0 and "no new score is needed" not in said, said
    assert f"run `dutchbook score {out}`" in said, said
    code, said = invoke("report", str(out))
    assert code == 2 and "its answers changed after it was scored" in said, said
    assert invoke("score", str(out))[0] == 0
    assert invoke("report", str(out))[0] == 0


def test_repairs_cut_short_after_a_reparse_are_stale_after_a_reparse_back(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for `repaired.parquet`: lenient's repairs committed, the command killed before
    its record; a reparse back to strict's answers called them current, 8 repaired sets of
    answers strict rejects among them."""
    out = root / "run"
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    assert invoke("repair", str(out))[0] == 0
    assert stale_repairs(out) is None
    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0
    with monkeypatch.context() as patch:
        real = runs.scored_from.record_scored_from  # what runs.repair_step calls
        patch.setattr(runs.repair_step, "record_scored_from", _killed_on_call(1)(real))
        assert invoke("repair", str(out))[0] == 137
    assert invoke("reparse", str(out), "--parser", "strict")[0] == 0
    assert (why := stale_repairs(out)) is not None and "dutchbook repair" in why
    assert invoke("repair", str(out))[0] == 0
    assert stale_repairs(out) is None


def _edit_two_accepted_replies(out: Path) -> None:
    """Make two replies the run accepted of the model `plain` garbage in `attempts/`, as a
    parser changed between versions would read them."""
    (shard,) = sorted((out / "attempts").glob("*.parquet"))
    attempts = pl.read_parquet(shard)
    plain_ok = (pl.col("model") == "plain") & (pl.col("outcome") == "ok")
    edited = attempts.filter(plain_ok).head(2)["request_id"].to_list()
    attempts.with_columns(
        pl.when(plain_ok & pl.col("request_id").is_in(edited))
        .then(pl.lit("garbage"))
        .otherwise(pl.col("raw_text"))
        .alias("raw_text")
    ).write_parquet(shard)


def test_replies_the_runs_own_parser_now_rejects_are_not_lost_answers(root: Path) -> None:
    """A hostile pass: two accepted replies edited in `attempts/` (a parser changed between
    versions does the same), then `reparse --parser lenient`, the run's own: it rejected them,
    and `score`, `repair`, `report` and a resume each refused the folder for 2 lost answers,
    saying to run that very reparse, which changed nothing: a dead end."""
    out = root / "run"
    _edit_two_accepted_replies(out)
    code, said = invoke("reparse", str(out), "--parser", "lenient")
    assert code == 0 and "accepted 56 → 54" in said, said
    for command in ("score", "repair", "report"):
        code, said = invoke(command, str(out))
        assert code == 0 and "missing from responses/" not in said, (command, said)
    audit = run_audit(out)
    assert audit.totals.answers_missing == 0, audit.totals
    # Said as what it is: no strict reparse ran, and none takes them back (a review).
    for command in ("status", "audit"):
        code, said = invoke(command, str(out))
        assert code == 0 and "--parser strict" not in said, (command, said)
        assert "`dutchbook reparse --parser lenient`, the parser its answers are read with, " \
            "rejected the replies the run had accepted" in " ".join(said.split()), said
    # A loss after that reparse is still a loss: the answers the lenient parser takes.
    for part in (out / "responses").glob("*.parquet"):
        part.unlink()
    code, said = invoke("score", str(out))
    assert code == 2 and "54 accepted answers are missing from responses/" in said, said


def test_a_reply_the_runs_own_parser_rejected_and_a_resume_asked_again_is_no_duplicate(
    root: Path,
) -> None:
    """Two accepted replies edited in `attempts/`, `reparse --parser lenient` (the run's own)
    rejecting them, then a resume that asked both requests again: the audit's retries table
    and `status` counted each rejected reply a `duplicate answers` retry attempt once the new
    answer was in. Each is an invalid response rejected on reparse, and asked again."""
    out = root / "run"
    _edit_two_accepted_replies(out)
    assert invoke("reparse", str(out), "--parser", "lenient")[0] == 0
    code, said = invoke("run", str(root / "spec.toml"), "--out", str(out))
    assert code == 0, said
    code, said = invoke("audit", str(out), "--json")
    assert code == 0, said
    totals = json.loads(said)["totals"]
    assert totals["accepted"] == 56 and totals["retries_by_cause"]["duplicate"] == 0, totals
    assert totals["retries_by_cause"]["invalid_response"] == 2, totals
    assert totals["invalid_response_subcauses"]["rejected_on_reparse"] == 2, totals
    code, said = invoke("status", str(out), "--json")
    assert code == 0 and json.loads(said)["duplicate_ok_attempts"] == 0, said
