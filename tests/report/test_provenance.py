"""The report says where its numbers come from (spec, versions, inputs, when the answers were
asked for), and `dutchbook report` rebuilds it from a folder whose spec names its data
relative to the spec's own folder (as `runs/specs/local.toml` does): that failed with
"data.families: a file or folder that exists (.../run/local-families does not)"."""

from __future__ import annotations

import hashlib
import shutil
from datetime import datetime, timedelta
from importlib import metadata
from pathlib import Path

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from engine.scan import scan_attempts
from panels.families import FAMILIES_DIR
from runs.cli import app
from runs.phases import read_phases
from runs.report.provenance import answers_span, provenance
from runs.report_page import PAGE
from tests.runs.quiet_campaign import run_quietly

FAMILIES = sorted(FAMILIES_DIR.glob("control-*.toml"))[:2]
SPEC = """
name = "provenance"
seed = 4
[data]
stock_days = 2
families = "my-families"
[[models]]
name = "m"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
[[arms]]
name = "families/isolated"
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("provenance")
    (root / "my-families").mkdir()
    for family in FAMILIES:
        shutil.copy(family, root / "my-families" / family.name)
    return run_quietly(root, "provenance", SPEC)


def test_the_summary_names_spec_versions_inputs_and_when(run_dir: Path) -> None:
    summary = orjson.loads((run_dir / "report" / "summary.json").read_bytes())
    prov = summary["provenance"]
    assert prov["campaign"] == "provenance"
    assert prov["parser"] == "strict" and prov["parser_from"] == "spec"  # the spec's default
    assert prov["spec_sha256"] == hashlib.sha256((run_dir / "spec.toml").read_bytes()).hexdigest()
    assert prov["planned_with"] == prov["reported_with"] == metadata.version("dutchbook")
    for family in FAMILIES:  # each input by name and digest; no path of this machine
        digest = hashlib.sha256(family.read_bytes()).hexdigest()
        assert prov["inputs"][f"families/{family.name}"] == digest
    assert "returns (embedded)" in prov["inputs"]
    assert str(run_dir.parent) not in orjson.dumps(prov).decode()
    assert prov["first_attempt_at"] <= prov["last_attempt_at"] and prov["runs"] == 1
    markdown = (run_dir / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Provenance" in markdown and prov["spec_sha256"] in markdown
    page = (run_dir / "report" / PAGE).read_text(encoding="utf-8")
    assert "<h2>Provenance</h2>" in page and prov["spec_sha256"] in page
    assert f"{len(prov['inputs'])} input files (SHA-256)" in page


def test_report_rebuilds_from_a_folder_whose_data_paths_were_relative(run_dir: Path) -> None:
    before = orjson.loads((run_dir / "report" / "summary.json").read_bytes())
    (run_dir / "report" / "summary.json").unlink()
    rebuilt = CliRunner().invoke(app, ["report", str(run_dir)], env={"COLUMNS": "200"})
    assert rebuilt.exit_code == 0, rebuilt.output
    after = orjson.loads((run_dir / "report" / "summary.json").read_bytes())
    assert after["rows"] == before["rows"] and after["provenance"] == before["provenance"]


@pytest.mark.parametrize("command", ["score", "repair"])
def test_score_without_the_spec_its_relative_data_needs_says_to_give_it(
    run_dir: Path, command: str
) -> None:
    """`score` and `repair` need the data; the frozen copy cannot resolve a relative path,
    and the error named the path without saying what to do."""
    done = CliRunner().invoke(app, [command, str(run_dir)], env={"COLUMNS": "200"})
    assert done.exit_code == 2, done.output
    assert "data.families" in done.output and "give that spec with --spec" in done.output
    assert done.output.count("\n") == 1


def test_a_folder_that_knows_nothing_says_so() -> None:
    empty = {"first_attempt_at": None, "last_attempt_at": None, "runs": 0}
    assert answers_span(empty) == "No attempt recorded."
    three = {"first_attempt_at": "2026-01-01 00:00:00", "last_attempt_at": "2026-01-02 00:00:00",
             "runs": 3}  # fmt: skip
    assert answers_span(three).endswith("(UTC), over 3 runs (the first and 2 resumes).")
    sent_by_two = {**three, "runs_with_attempts": 2}
    assert answers_span(sent_by_two).endswith(
        "(UTC), in 2 of 3 runs (the first and 2 resumes; the other sent none)."
    )
    assert answers_span({**three, "runs_with_attempts": 3}) == answers_span(three)


def test_provenance_of_a_bare_folder_is_nulls_not_an_error(tmp_path: Path) -> None:
    prov = provenance(tmp_path)
    assert prov["spec_sha256"] is None and prov["inputs"] == {}
    assert prov["first_attempt_at"] is None and prov["runs"] == 0
    assert prov["runs_with_attempts"] == 0


def _laps(run_dir: Path, pid: int, at: datetime) -> None:
    """The phase lines of one more `dutchbook run` of the folder, its plan lapped at `at`."""
    with (run_dir / "logs" / "phases.jsonl").open("a", encoding="utf-8") as phases:
        for n, phase in enumerate(("plan", "dispatch", "score", "report")):
            when = (at + timedelta(seconds=n)).isoformat()
            phases.write(f'{{"at": "{when}", "pid": {pid}, "phase": "{phase}", "seconds": 1}}\n')


def _attempt_span(run_dir: Path) -> tuple[datetime, datetime]:
    """The first and the last attempt's `started_at` in the folder's ledger."""
    span = scan_attempts(run_dir, ["started_at"]).select(
        first=pl.col("started_at").min(), last=pl.col("started_at").max()
    ).collect()
    return span["first"][0], span["last"][0]


def test_runs_that_sent_nothing_are_not_said_to_have_sent_attempts(
    run_dir: Path, tmp_path: Path
) -> None:
    """Two runs of a finished folder (each "0 answers accepted", no attempt sent) made its
    report say "Attempts sent from ... over 3 runs (the first and 2 resumes)": the runs
    counted were every process in logs/phases.jsonl, not those that sent attempts."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    first, last = _attempt_span(folder)
    for minutes in (1, 2):  # two runs after the last attempt: nothing left to send
        _laps(folder, 10**7 + minutes, last + timedelta(minutes=minutes))
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (3, 1)
    assert answers_span(prov).endswith(
        "(UTC), in 1 of 3 runs (the first and 2 resumes; the other 2 sent none)."
    )
    rebuilt = CliRunner().invoke(app, ["report", str(folder)], env={"COLUMNS": "200"})
    assert rebuilt.exit_code == 0, rebuilt.output
    markdown = (folder / "report" / "report.md").read_text(encoding="utf-8")
    assert "in 1 of 3 runs (the first and 2 resumes; the other 2 sent none)" in markdown
    # A resume that sent the last attempt, planned after the first was sent, counts.
    _laps(folder, 10**7 + 3, first + (last - first) / 2)
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (4, 2)
    assert answers_span(prov).endswith("in 2 of 4 runs (the first and 3 resumes; the other 2 "
                                       "sent none).")  # fmt: skip


def test_resumes_that_reuse_a_pid_are_runs_of_their_own(run_dir: Path, tmp_path: Path) -> None:
    """Each `docker run` of a folder is pid 1: runs were told apart by pid, so a resume in a
    container merged with the run before and report.md said "in one run" of two. A resume
    (after a kill in dispatch, its last attempt sent by it) and a run of the finished folder,
    both with the first run's pid: three runs, two of which sent attempts."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    (pid,) = {lap["pid"] for lap in read_phases(folder)}
    assert isinstance(pid, int)
    first, last = _attempt_span(folder)
    _laps(folder, pid, first + (last - first) / 2)
    _laps(folder, pid, last + timedelta(minutes=1))
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (3, 2)
    assert answers_span(prov).endswith(
        "(UTC), in 2 of 3 runs (the first and 2 resumes; the other sent none)."
    )


def test_a_resume_whose_plan_lap_was_not_written_still_sent_its_attempts(
    run_dir: Path, tmp_path: Path
) -> None:
    """A lap is written as its phase ends, and one the disk refused is let go: a resume
    whose plan lap was lost opened at its dispatch lap, written after its last attempt, so
    its attempts read as the first run's ("in 1 of 2 runs", a tester's torn plan line)."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    (pid,) = {lap["pid"] for lap in read_phases(folder)}
    assert isinstance(pid, int)
    first, last = _attempt_span(folder)
    began, ended = first + (last - first) / 2, last + timedelta(minutes=1)
    seconds = (ended - began).total_seconds()
    with (folder / "logs" / "phases.jsonl").open("a", encoding="utf-8") as phases:
        phases.write(f'{{"at": "{ended.isoformat()}", "pid": {pid + 1}, "phase": "dispatch", '
                     f'"seconds": {seconds}}}\n')  # fmt: skip
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (2, 2)


def _lap(
    run_dir: Path, phase: str, at: datetime, pid: object, seconds: float = 1, **more: object
) -> None:
    """One phase line more, as `runs.phases` writes it (`more`: its `started`, damaged or not;
    none, as an older version wrote it)."""
    line = {"at": at.isoformat(), "pid": pid, "phase": phase, "seconds": seconds, **more}
    with (run_dir / "logs" / "phases.jsonl").open("ab") as phases:
        phases.write(orjson.dumps(line) + b"\n")


def _resume(run_dir: Path, began: datetime, pid: object, phases: tuple[str, ...]) -> None:
    """A resume of the folder that began at `began` (its `started`) and whose dispatch ended
    a minute after the folder's last attempt: of its laps, only `phases` were written."""
    ended = _attempt_span(run_dir)[1] + timedelta(minutes=1)
    second = timedelta(seconds=1)
    ends = {"plan": began + second, "dispatch": ended, "score": ended + second,
            "report": ended + 2 * second}  # fmt: skip
    last = began
    for phase, at in ends.items():
        if phase in phases:
            _lap(run_dir, phase, at, pid, (at - last).total_seconds(), started=began.isoformat())
        last = at


def _older_version(run_dir: Path) -> int:
    """The folder's laps as a version that wrote no `started` left them; their pid."""
    laps = read_phases(run_dir)
    older = (orjson.dumps({k: v for k, v in lap.items() if k != "started"}) for lap in laps)
    (run_dir / "logs" / "phases.jsonl").write_bytes(b"".join(line + b"\n" for line in older))
    (pid,) = {lap["pid"] for lap in laps}
    assert isinstance(pid, int)
    return pid


def test_every_lap_of_a_run_names_the_run_by_when_it_began(run_dir: Path) -> None:
    """The key by which the report tells runs apart where pids and plan laps do not."""
    laps = read_phases(run_dir)
    assert [lap["phase"] for lap in laps] == ["plan", "dispatch", "score", "report"]
    (started,) = {lap["started"] for lap in laps}
    assert isinstance(started, str)
    assert datetime.fromisoformat(started) <= min(datetime.fromisoformat(str(lap["at"]))
                                                  for lap in laps)  # fmt: skip


def test_a_resume_whose_plan_and_dispatch_laps_were_lost_sent_its_attempts(
    run_dir: Path, tmp_path: Path
) -> None:
    """A resume whose plan and dispatch laps the disk refused opened at its score lap, less
    that lap's seconds: after its last attempt, which then read as the first run's ("in 1
    of 2 runs")."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    first, last = _attempt_span(folder)
    _resume(folder, first + (last - first) / 2, 10**7, ("score", "report"))
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (2, 2)


def test_a_resume_of_the_same_pid_whose_plan_lap_was_lost_is_a_run_of_its_own(
    run_dir: Path, tmp_path: Path
) -> None:
    """Each `docker run` is pid 1: a resume whose plan lap was lost, its first line of the
    run before's pid, merged with that run ("in one run" of two); and so did a run of the
    finished folder after it, its plan lap lost too."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    (pid,) = {lap["pid"] for lap in read_phases(folder)}
    first, last = _attempt_span(folder)
    _resume(folder, first + (last - first) / 2, pid, ("dispatch", "score", "report"))
    _resume(folder, last + timedelta(minutes=2), pid, ("score", "report"))
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (3, 2)
    assert answers_span(prov).endswith("in 2 of 3 runs (the first and 2 resumes; the other "
                                       "sent none).")  # fmt: skip


def test_a_run_that_began_before_the_last_run_ended_is_bounded_by_its_plan_lap(
    run_dir: Path, tmp_path: Path
) -> None:
    """`started` is taken before the run takes the folder's lock: one begun while the run
    before still dispatched planned only once that run had ended, and sent nothing before
    its plan lap. Bounded by its `started`, the first run's last attempts read as its own."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    (pid,) = {lap["pid"] for lap in read_phases(folder)}
    first, last = _attempt_span(folder)
    began = first + (last - first) / 2
    _lap(folder, "plan", last + timedelta(minutes=1), pid, started=began.isoformat())
    _lap(folder, "dispatch", last + timedelta(minutes=2), pid, started=began.isoformat())
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (2, 1)


def test_a_folder_of_an_older_version_counts_its_runs_as_before(
    run_dir: Path, tmp_path: Path
) -> None:
    """Laps without `started` are told apart by plan laps and pids, as they were: a resume
    whose plan lap was lost, of the same pid, is not told from the run before (nothing says
    it was another); one of another pid, or with its plan lap, is."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    pid = _older_version(folder)
    first, last = _attempt_span(folder)
    middle = first + (last - first) / 2
    _lap(folder, "dispatch", last + timedelta(minutes=1), pid, seconds=1)
    assert (provenance(folder)["runs"], provenance(folder)["runs_with_attempts"]) == (1, 1)
    _lap(folder, "plan", middle, pid)  # a plan lap opens a run of its own, whatever its pid
    _lap(folder, "dispatch", last + timedelta(minutes=2), pid + 1,
         seconds=(last + timedelta(minutes=2) - middle).total_seconds())  # fmt: skip
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (3, 2)


def test_a_folder_resumed_after_an_upgrade_counts_runs_of_both_versions(
    run_dir: Path, tmp_path: Path
) -> None:
    """Laps of an older version, then a resume by this one whose plan lap was lost, with the
    pid of the run before (a container's): two runs, both of which sent attempts; and a run
    of the finished folder after it, its plan lapped: three."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    pid = _older_version(folder)
    first, last = _attempt_span(folder)
    _resume(folder, first + (last - first) / 2, pid, ("dispatch", "score", "report"))
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (2, 2)
    _resume(folder, last + timedelta(minutes=2), pid, ("plan", "dispatch", "score", "report"))
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (3, 2)


@pytest.mark.parametrize(
    "damaged",
    [12, None, "yesterday", "2026-13-45T00:00:00", ["x"], {}, "0001-01-01T00:00:00+14:00"],
)
def test_a_damaged_started_is_read_as_a_line_without_one(
    run_dir: Path, tmp_path: Path, damaged: object
) -> None:
    """A hand-edited `started` that is no time: the line is told apart by its plan lap and
    pid, as a line of an older version is, and the report is written."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    (pid,) = {lap["pid"] for lap in read_phases(folder)}
    assert isinstance(pid, int)
    first, last = _attempt_span(folder)
    _lap(folder, "plan", first + (last - first) / 2, pid, started=damaged)  # a run of its own
    _lap(folder, "dispatch", last + timedelta(minutes=1), pid, started=damaged)  # the same run
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (2, 2)
    _lap(folder, "score", last + timedelta(minutes=2), pid + 1, started=damaged)  # another pid
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (3, 2)
    rebuilt = CliRunner().invoke(app, ["report", str(folder)], env={"COLUMNS": "200"})
    assert rebuilt.exit_code == 0, rebuilt.output


def test_a_lap_time_utc_cannot_hold_is_not_read(run_dir: Path, tmp_path: Path) -> None:
    """A hand-edited plan lap of year 1 at +14:00 is a time, but before year 1 in UTC: the
    report stopped on polars' OverflowError. Its run is counted, its start unknown."""
    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    with (folder / "logs" / "phases.jsonl").open("a", encoding="utf-8") as phases:
        phases.write('{"at": "0001-01-01T00:00:00+14:00", "pid": 1, "phase": "plan"}\n')
    prov = provenance(folder)
    assert (prov["runs"], prov["runs_with_attempts"]) == (2, 1)


def test_after_a_reparse_the_report_names_the_parser_that_made_its_answers(
    run_dir: Path, tmp_path: Path
) -> None:
    """The spec said strict; after `reparse --parser lenient` the answers were lenient's and
    nothing in the folder said so."""
    root = tmp_path / "copy"
    shutil.copytree(run_dir.parent, root)  # the folder, its spec and its families
    folder, runner = root / "run", CliRunner()
    for args in (["reparse", str(folder), "--parser", "lenient"],
                 ["score", str(folder), "--spec", str(root / "provenance.toml")],
                 ["report", str(folder)]):  # fmt: skip
        done = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert done.exit_code == 0, (args, done.output)
    prov = orjson.loads((folder / "report" / "summary.json").read_bytes())["provenance"]
    assert prov["parser"] == "lenient"
    assert prov["parser_from"].startswith("dutchbook reparse at 20")
    markdown = (folder / "report" / "report.md").read_text(encoding="utf-8")
    assert "answers read by the lenient parser (dutchbook reparse at 20" in markdown


def _answers_accepted_at(run_dir: Path, at: str) -> None:
    """A responses shard of one more answer, accepted at `at`."""
    from engine.records import responses_frame

    shards = run_dir / "responses"
    shards.mkdir(exist_ok=True)
    n = len(list(shards.glob("*.parquet")))
    row = {"request_id": f"r{n}", "model": "m", "arm": "a", "unit": "u", "pass": 0,
           "events": ["e"], "keys": ["probability"], "raw_text": "{}", "values": [0.5],
           "finish_reason": "stop", "tokens_in": 1, "tokens_out": 1, "attempts": 1,
           "accepted_at": at}  # fmt: skip
    responses_frame([row]).write_parquet(shards / f"part-{n:08d}.parquet")


def test_a_run_after_a_reparse_to_another_parser_leaves_answers_of_both(tmp_path: Path) -> None:
    """A resume after `reparse --parser lenient` read its new answers with the spec's strict
    parser: the folder then holds answers of both, and the report must not name one. `run`
    now refuses that resume (tests/runs/test_resume_after_reparse.py), but a folder made by
    an older version may hold both: the records are written here, as such a folder has them."""
    from runs.report.provenance import parser_words

    (tmp_path / "spec.toml").write_text('name = "x"\nparser = "strict"\n', encoding="utf-8")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reparses.jsonl").write_text(
        '{"at": "2026-12-04T10:00:00+00:00", "parser": "lenient"}\n', encoding="utf-8"
    )
    prov = provenance(tmp_path)
    assert (prov["parser"], prov["parser_from"]) == (
        "lenient", "dutchbook reparse at 2026-12-04T10:00:00+00:00"
    )
    (logs / "phases.jsonl").write_text(  # a dispatch that ended before the reparse
        '{"at": "2026-12-04T09:59:59.5+00:00", "pid": 1, "phase": "dispatch", "seconds": 1}\n',
        encoding="utf-8",
    )
    assert provenance(tmp_path)["parser"] == "lenient"
    with (logs / "phases.jsonl").open("a", encoding="utf-8") as phases:  # and one after it
        phases.write('{"at": "2026-12-04T10:00:30+00:00", "pid": 2, "phase": "dispatch"}\n')
    # It asked nothing: every answer is still the reparse's ("two parsers" was said of them).
    _answers_accepted_at(tmp_path, "2026-12-04T09:59:59.4+00:00")
    assert provenance(tmp_path)["parser"] == "lenient"
    _answers_accepted_at(tmp_path, "2026-12-04T10:00:20+00:00")  # an answer it accepted
    mixed = provenance(tmp_path)
    assert mixed["parser"] == "mixed" and mixed["runs"] == 2
    assert parser_words(mixed) == (
        "answers read by two parsers: lenient by dutchbook reparse at "
        "2026-12-04T10:00:00+00:00, then strict for what later runs asked"
    )
    (tmp_path / "spec.toml").write_text('name = "x"\nparser = "lenient"\n', encoding="utf-8")
    assert provenance(tmp_path)["parser"] == "lenient"  # the same parser both times


@pytest.mark.parametrize(
    ("reparsed_at", "dispatch_at"),
    [
        ("2026-12-04T10:00:00+00:00", "2026-12-04T10:00:30"),  # the lap's offset cut off
        ("2026-12-04T10:00:00", "2026-12-04T10:00:30+00:00"),  # the reparse's
        ("2026-12-04T12:00:00+02:00", "2099-01-01"),  # a date alone
        ("9999-12-31T23:59:59.9+00:00", "9999-12-31T23:59:59.95+00:00"),  # no second after
    ],
)
def test_lap_and_reparse_times_with_and_without_an_offset_are_compared_in_utc(
    tmp_path: Path, reparsed_at: str, dispatch_at: str
) -> None:
    """A hand-edited time without an offset, on a dispatch lap or the reparse's line, ended
    `report`, `status` and a resume's last step in "can't compare offset-naive and
    offset-aware datetimes" (a hostile tester's). Read as UTC, as a lap's other times are."""
    (tmp_path / "spec.toml").write_text('name = "x"\nparser = "strict"\n', encoding="utf-8")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reparses.jsonl").write_text(
        f'{{"at": "{reparsed_at}", "parser": "lenient"}}\n', encoding="utf-8"
    )
    (logs / "phases.jsonl").write_text(
        f'{{"at": "{dispatch_at}", "pid": 2, "phase": "dispatch", "seconds": 1}}\n',
        encoding="utf-8",
    )
    _answers_accepted_at(tmp_path, "2026-12-04T10:00:20+00:00")
    late = reparsed_at.startswith("9999")  # nothing can be after it
    assert provenance(tmp_path)["parser"] == ("lenient" if late else "mixed")


def test_a_run_of_the_embedded_returns_says_they_are_not_the_papers_sample(
    figures_run: Path,
) -> None:
    """The embedded returns (skfolio's S&P 500 stocks, 2018-2022) are not the paper's sample
    (August-December 2025); a report of them did not say so."""
    import polars as pl

    from panels.data import EMBEDDED_RETURNS

    shipped = pl.read_parquet(EMBEDDED_RETURNS)
    dates = sorted(shipped["date"].unique().to_list())
    said = (
        f"{shipped['asset'].n_unique()} S&P 500 stocks from skfolio's dataset, daily adjusted "
        f"closes, {dates[0]} to {dates[-1]}"
    )
    markdown = (figures_run / "report" / "report.md").read_text(encoding="utf-8")
    provenance_part = markdown[markdown.index("## Provenance") :].replace("\\", "")
    assert f"Stock returns: {said}" in provenance_part
    assert "not the paper's sample (CRSP returns" in provenance_part
    page = (figures_run / "report" / PAGE).read_text(encoding="utf-8")
    assert "not the paper&#x27;s sample (CRSP returns" in page


def test_embedded_returns_of_another_version_are_said_without_figures_read_now() -> None:
    from panels.data import embedded_returns_words

    words = embedded_returns_words("0" * 64)
    assert "another dutchbook version" in words and "not the paper's sample" in words


def test_a_run_since_a_file_was_written_is_one_that_began_after_it_and_sent_attempts(
    run_dir: Path, tmp_path: Path
) -> None:
    """`run_since` (what tells `audit` that `logs/lanes.json` is an earlier run's): the
    latest run, where it began after the file's time, to the second, and sent an attempt
    from then on; not a run that began after it and sent nothing, nor one begun before it."""
    from runs.run_history import run_since

    folder = tmp_path / "run"
    shutil.copytree(run_dir, folder)
    last = _attempt_span(folder)[1]
    (began,) = {datetime.fromisoformat(str(lap["at"])) for lap in read_phases(folder)
                if lap["phase"] == "plan"}  # fmt: skip
    before = (began - timedelta(seconds=1)).isoformat(timespec="seconds")
    assert run_since(folder, before) == began  # the file is older than the one run
    assert run_since(folder, began.isoformat(timespec="seconds")) is None  # its second
    assert run_since(folder, last.isoformat()) is None
    assert run_since(folder, None) is None and run_since(folder, "damaged") is None
    assert run_since(folder, "9999-12-31T23:59:59+00:00") is None  # hand-edited: no overflow
    _resume(folder, last + timedelta(minutes=2), 10**7, ("plan", "score", "report"))
    assert run_since(folder, last.isoformat()) is None  # a later run that sent nothing
    # The run that sent attempts after the file is found behind the later one that sent
    # nothing (a resume killed before its lanes' first write, then a run refused before it
    # dispatched): only the last run was asked, and the file read as current.
    assert run_since(folder, before) == began
