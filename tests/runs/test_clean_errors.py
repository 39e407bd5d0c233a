"""Fault 2 and 5 of issue 9: every user error of `dutchbook run` ends in one literal line, exit 2.

A bad family or returns file, a corrupt journal line in the middle of a segment, a spec that
is not UTF-8: each used to end in a traceback and exit 1. Error text that looks like Rich
markup (`[[models]]`, `[/x]`) is printed as written.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import runs.commands._errors
import runs.pipeline
import runs.planner
from engine.lanes import LaneStats
from engine.progress import render
from runs.cli import app
from runs.spec import load_spec
from runs.units import UnitSource
from tests.runs.run_folders import FinishedRuns

SPEC = """
name = "clean"
seed = 3
[data]
stock_days = 2
{data}
[[models]]
name = "{model}"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "{arm}"
"""


def write_spec(tmp_path: Path, *, data: str = "", model: str = "m", arm: str = "baseline") -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(data=data, model=model, arm=arm), encoding="utf-8")
    return path


def finished(finished_runs: FinishedRuns, tmp_path: Path) -> tuple[Path, Path]:
    """What running `write_spec(tmp_path)`'s spec into `tmp_path/out` leaves, a copy of the
    session's run of it (these tests are of what commands say of the folder after): the
    spec and the folder."""
    text = SPEC.format(data="", model="m", arm="baseline")  # as `write_spec` writes it
    return tmp_path / "spec.toml", finished_runs.finish(tmp_path, text)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.output


def assert_one_clean_line(output: str, *needles: str) -> None:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    for needle in needles:
        assert needle in errors[0], output


def test_run_refuses_a_bad_family_file_cleanly(tmp_path: Path) -> None:
    families = tmp_path / "families"
    families.mkdir()
    (families / "bad.toml").write_text('id = "x"\ntitle = "t"\n', encoding="utf-8")
    spec = write_spec(tmp_path, data=f'families = "{families.as_posix()}"', arm="families/isolated")
    code, output = invoke("run", str(spec), "--out", str(tmp_path / "out"))
    assert code == 2
    assert_one_clean_line(output, "bad.toml", "missing key")


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_data_path_that_is_a_link_loop_is_refused_by_its_key(
    tmp_path: Path, command: str
) -> None:
    """`Path.resolve` raised RuntimeError("Symlink loop from ..."): a 68-line traceback."""
    (tmp_path / "fams").symlink_to("fams")
    spec = write_spec(tmp_path, data='families = "fams"', arm="families/isolated")
    args = [command, str(spec)] + (["--out", str(tmp_path / "out")] if command == "run" else [])
    code, output = invoke(*args)
    assert code == 2, output
    # Python 3.11 and 3.12 say "Symlink loop"; 3.13 resolves it and finds no folder there.
    assert_one_clean_line(output, "data.families", str(tmp_path / "fams"))
    assert not (tmp_path / "out").exists()


def test_run_refuses_a_bad_returns_file_cleanly(tmp_path: Path) -> None:
    returns = tmp_path / "returns.csv"
    returns.write_text("date,asset\n2020-01-02,A\n", encoding="utf-8")
    spec = write_spec(tmp_path, data=f'returns = "{returns.as_posix()}"')
    code, output = invoke("run", str(spec), "--out", str(tmp_path / "out"))
    assert code == 2
    assert_one_clean_line(output, "returns.csv")


def _real_returns(tmp_path: Path, absurd_row: int | None = None) -> Path:
    """Two embedded stocks' returns as a CSV, one row's return set to 1e160 if asked."""
    import polars as pl

    from panels.data import load_returns

    df = load_returns().filter(pl.col("asset").is_in(["AAPL", "MSFT"])).select(
        "date", "asset", "ret"
    )
    if absurd_row is not None:
        df = df.with_columns(
            pl.when(pl.int_range(pl.len()) == absurd_row - 1).then(1e160).otherwise("ret")
            .alias("ret")
        )
    path = tmp_path / "returns.csv"
    df.write_csv(path)
    return path


def test_an_absurd_return_is_refused_by_file_row_and_value_without_a_warning(
    tmp_path: Path,
) -> None:
    """It overflowed the scale's square (numpy's RuntimeWarning on the console), then was
    said to be a history with "no spread", naming no file or row."""
    import warnings

    returns = _real_returns(tmp_path, absurd_row=200)
    spec = write_spec(tmp_path, data=f'returns = "{returns.as_posix()}"')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, output = invoke("plan", str(spec))
    assert code == 2
    assert_one_clean_line(output, f"{returns}: column 'ret'", "+1000%", "row 200 has '1e+160'")
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("rows", [0, 64], ids=["header only", "one row short"])
def test_returns_too_short_for_any_question_are_named(tmp_path: Path, rows: int) -> None:
    """The sampler's message named no file: the returns file is what to change."""
    returns = _real_returns(tmp_path)
    lines = returns.read_text().splitlines()  # AAPL's rows first, by date
    returns.write_text("\n".join(lines[: rows + 1]) + "\n")
    spec = write_spec(tmp_path, data=f'returns = "{returns.as_posix()}"')
    code, output = invoke("plan", str(spec))
    assert code == 2
    assert_one_clean_line(output, f"{returns}: no ", "60 prior and 5 later trading days")


def test_more_stock_days_than_the_data_holds_names_the_key(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text().replace("stock_days = 2", "stock_days = 100000000000"))
    code, output = invoke("plan", str(spec))
    assert code == 2
    assert_one_clean_line(
        output, f"{spec}: data.stock_days: an even number of at most ", "dates qualify"
    )


def test_run_refuses_a_spec_that_is_not_utf8_cleanly(tmp_path: Path) -> None:
    spec = tmp_path / "latin1.toml"
    spec.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    for command in ("run", "plan"):
        code, output = invoke(command, str(spec))
        assert code == 2
        assert_one_clean_line(output, "latin1.toml", "not UTF-8")


def test_run_refuses_a_corrupt_journal_line_mid_segment_cleanly(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    spec, out = finished(finished_runs, tmp_path)
    journal = out / "journal"
    journal.mkdir(exist_ok=True)
    # A segment whose middle line is torn (a tail could be a crash mid-write; a middle is not).
    (journal / "seg-00000001.jsonl").write_text('{"kind": "result", "attem\n{}\n')
    code, output = invoke("run", str(spec), "--out", str(out))
    assert code == 2
    assert_one_clean_line(output, "seg-00000001.jsonl")


@pytest.mark.parametrize("arm", ["[[models]]", "[/x]"])
def test_error_text_is_printed_literally_not_as_markup(tmp_path: Path, arm: str) -> None:
    spec = write_spec(tmp_path, arm=arm)
    code, output = invoke("run", str(spec))
    assert code == 2
    assert_one_clean_line(output, repr(arm))


def test_model_names_that_look_like_markup_run_report_and_show_in_status(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, model="[/x]")
    out = tmp_path / "out"
    code, output = invoke("run", str(spec), "--out", str(out))
    assert code == 0, output
    assert "[/x]" in output
    code, output = invoke("status", str(out))
    assert code == 0, output
    assert "[/x]" in output


def test_the_live_progress_table_prints_a_markup_like_name_literally() -> None:
    lane = LaneStats(model="[/x]", provider="sim", planned=2, message="[bold]down[/]")
    console = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    console.print(render([lane]))
    text = console.export_text()
    assert "[/x]" in text and "[bold]down[/]" in text


@pytest.mark.parametrize("out", ["taken", "taken/run", "dangling"])
def test_run_refuses_an_out_a_file_stands_in_the_way_of_before_planning(
    tmp_path: Path, out: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "taken").write_text("not a folder", encoding="utf-8")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")

    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned before refusing the folder")

    monkeypatch.setattr(runs.pipeline, "_estimate", no_planning)
    code, output = invoke("run", str(write_spec(tmp_path)), "--out", str(tmp_path / out))
    assert code == 2, output
    blocker = tmp_path / out.split("/")[0]
    assert_one_clean_line(output, f"{blocker}", "is not a folder; give --out a folder")
    assert (tmp_path / "taken").read_text(encoding="utf-8") == "not a folder"
    assert not (tmp_path / "nowhere").exists()


def test_run_says_in_one_line_when_its_folder_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    mkdir = Path.mkdir

    def refuse_the_run_folder(self: Path, *args: Any, **kwargs: Any) -> None:
        if self == run_dir:
            raise PermissionError(13, "Permission denied", str(self))
        mkdir(self, *args, **kwargs)

    spec = write_spec(tmp_path)
    monkeypatch.setattr(Path, "mkdir", refuse_the_run_folder)
    code, output = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 2, output
    assert_one_clean_line(output, f"cannot make the run folder {run_dir}", "Permission denied")


def test_a_resume_says_in_one_line_what_in_its_folder_it_may_not_write(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run folder whose `journal/` (or `logs/`, `spec-history.jsonl`) this user may not
    write ended a resume in a traceback."""
    import os

    spec, run_dir = finished(finished_runs, tmp_path)
    journal, real_open = run_dir / "journal", os.open

    def denied(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).parent == journal and flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    code, output = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 2, output
    assert_one_clean_line(
        output, f"cannot write in {journal} (Permission denied)", "give it the access it lacks"
    )


def test_a_plan_it_may_not_read_is_named_not_its_folder(
    finished_runs: FinishedRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`status` said "cannot look at DIR" and `run` "cannot make a run folder at DIR" of a
    folder that exists, when its `plan.parquet` was what this user could not read."""
    import runs.plan_checksums

    spec, run_dir = finished(finished_runs, tmp_path)
    plan = run_dir / "plan_members.parquet"  # the first of the plan's files hashed

    def denied(path: Path) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(runs.plan_checksums, "file_sha256", denied)
    for command, said in (("status", "cannot look at"), ("audit", "cannot look at")):
        code, output = invoke(command, str(run_dir))
        assert code == 2, output
        assert_one_clean_line(output, f"{said} {plan}: Permission denied")
    code, output = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 2, output
    assert_one_clean_line(output, f"cannot read {plan}: Permission denied")


@pytest.mark.parametrize("command", ["run", "status", "audit", "reparse", "score", "repair",
                                     "report"])  # fmt: skip
def test_a_folder_name_too_long_is_said_in_one_line(tmp_path: Path, command: str) -> None:
    """`--out` (or a folder command's DIR) with a name over 255 bytes ended in a traceback:
    `Path.exists` raises ENAMETOOLONG where it answers False for a missing path."""
    too_long = tmp_path / ("a" * 300)
    args = ["run", str(write_spec(tmp_path)), "--out"] if command == "run" else [command]
    code, output = invoke(*args, str(too_long))
    assert code == 2, output
    where = "cannot make a run folder at" if command == "run" else "cannot look at"
    assert_one_clean_line(output, f"{where} {too_long}", "File name too long")
    assert list(tmp_path.iterdir()) == ([tmp_path / "spec.toml"] if command == "run" else [])


def test_any_other_path_too_long_ends_in_one_line(tmp_path: Path) -> None:
    """The command line's net for a name no file can have, where a command has no check of
    its own: `serve-sim --counts-file` ended in a traceback before listening."""
    too_long = tmp_path / ("c" * 300)
    code, output = invoke("serve-sim", "--port", "0", "--counts-file", str(too_long))
    assert code == 2, output
    assert_one_clean_line(output, f"{too_long}: File name too long", "give a shorter name")


@pytest.mark.parametrize("max_cost", ["-1", "nan", "-inf"])
def test_run_refuses_a_max_cost_that_caps_nothing_before_planning(
    tmp_path: Path, max_cost: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned before refusing --max-cost")

    monkeypatch.setattr(runs.pipeline, "_estimate", no_planning)
    spec = write_spec(tmp_path)
    code, output = invoke("run", str(spec), f"--max-cost={max_cost}", "--out", str(tmp_path / "r"))
    assert code == 2, output
    assert_one_clean_line(output, "--max-cost must be a number of USD, 0 or more", max_cost)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_campaign_too_large_to_plan_is_refused_at_once(tmp_path: Path, command: str) -> None:
    spec = write_spec(tmp_path)
    spec.write_text(spec.read_text(encoding="utf-8") + "passes = 1000000000\n", encoding="utf-8")
    args = [command, str(spec)] + (["--out", str(tmp_path / "r")] if command == "run" else [])
    code, output = invoke(*args)  # before the guard: planned for weeks in silence
    assert code == 2, output
    assert_one_clean_line(
        output,
        "more than the 50,000,000 a campaign may ask",
        "arms[0] (baseline): 1,000,000,000 passes x ",
        "check its passes and [data]",
    )
    assert not (tmp_path / "r").exists()


def test_a_campaign_of_countless_passes_is_refused_with_the_numbers_lengths(
    tmp_path: Path,
) -> None:
    # `passes` of 400 digits was refused with its 400-digit count and the campaign's
    spec = write_spec(tmp_path)
    text = spec.read_text(encoding="utf-8") + "passes = 1" + "0" * 400 + "\n"
    spec.write_text(text, encoding="utf-8")
    code, output = invoke("run", str(spec), "--out", str(tmp_path / "r"))
    assert code == 2, output
    assert_one_clean_line(
        output,
        "-digit number of queries, more than the 50,000,000 a campaign may ask",
        "arms[0] (baseline): a 401-digit number of passes x ",
    )
    assert "0,000,000,000,000,000,000,000,000" not in output


def test_the_size_guard_admits_a_campaign_at_the_limit_and_refuses_one_above(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(write_spec(tmp_path))
    units = UnitSource.from_spec(spec)
    asked = runs.planner.queries_before_sharing(spec, units)
    assert asked > 0
    monkeypatch.setattr(runs.planner, "MAX_CAMPAIGN_QUERIES", asked)
    runs.planner.check_campaign_size(spec, units)
    monkeypatch.setattr(runs.planner, "MAX_CAMPAIGN_QUERIES", asked - 1)
    with pytest.raises(runs.planner.CampaignTooLarge, match=f"asks {asked:,} queries"):
        runs.planner.check_campaign_size(spec, units)


def _run_with_a_folder_where(
    finished_runs: FinishedRuns, tmp_path: Path, file: Path
) -> tuple[Path, Path]:
    """A finished run folder whose `file` (relative to it) is replaced by a folder."""
    _, out = finished(finished_runs, tmp_path)
    (out / file).unlink()
    (out / file).mkdir()
    return out, out / file


def test_report_says_what_stands_in_its_way_in_words_not_errno(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    # It printed "error: [Errno 21] Is a directory: '.../report/index.tmp' -> '...'" (the
    # report is now written beside `report/` and swapped in: runs.report_folder).
    out, page = _run_with_a_folder_where(finished_runs, tmp_path, Path("report", "index.html"))
    code, output = invoke("report", str(out))
    assert code == 2, output
    assert_one_clean_line(
        output,
        f"Is a directory: {page}",
        f"({page} is a folder where a file goes: move or remove it, then run the same command",
    )
    assert page.is_dir()  # the report, written beside, did not take its place and remove it
    assert "Errno" not in output
    # Nothing of a report that was not written: the leaderboard and the files it "wrote".
    assert "leaderboard.txt" not in output and "profit" not in output, output
    shutil.rmtree(out / "report")
    (out / "report").write_text("in the way", encoding="utf-8")
    code, output = invoke("report", str(out))
    assert code == 2, output
    # It said only "File exists: DIR/report".
    assert_one_clean_line(
        output,
        f"File exists: {out / 'report'} ({out / 'report'} is a file where a folder goes: move "
        "or remove it, then run the same command again)",
    )


def test_a_file_in_the_way_of_a_deeper_folder_is_named(tmp_path: Path) -> None:
    """ENOTDIR names the whole path; the message names the file among its parents."""
    blocker = tmp_path / "out"
    blocker.write_text("not a folder", encoding="utf-8")
    missing = blocker / "report" / "index.html"
    with pytest.raises(NotADirectoryError) as caught:
        missing.write_text("x", encoding="utf-8")
    described = runs.commands._errors._describe(caught.value)
    assert described.endswith(
        f"({blocker} is a file where a folder goes: move or remove it, then run the same "
        "command again)"
    ), described
    assert runs.commands._errors._describe(FileNotFoundError(2, "No such file", "x")) == (
        "No such file: x"
    )


@pytest.mark.parametrize("command", ["status", "audit"])
def test_status_and_audit_say_in_one_line_what_stands_where_lanes_json_goes(
    finished_runs: FinishedRuns, tmp_path: Path, command: str
) -> None:
    """Both read `logs/lanes.json`; a folder standing there ended them in a traceback."""
    out, lanes = _run_with_a_folder_where(finished_runs, tmp_path, Path("logs", "lanes.json"))
    code, output = invoke(command, str(out))
    assert code == 2, output
    assert_one_clean_line(
        output,
        f"Is a directory: {lanes} ({lanes} is a folder where a file goes: move or remove it, "
        "then run the same command again)",
    )


PAID_SPEC = """
name = "paid"
seed = 3
[data]
stock_days = 2
[[models]]
name = "g"
provider = "groq"
model = "openai/gpt-oss-120b"
{prices}
[[models]]
name = "s"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


@pytest.mark.parametrize("rehearse", [False, True], ids=["live", "rehearsal"])
def test_a_max_cost_no_model_is_priced_for_is_refused_before_planning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rehearse: bool
) -> None:
    """With no model priced the cap counts nothing: the run was only warned, and spent on."""
    monkeypatch.setenv("GROQ_API_KEY", "gsk_not_a_real_key_for_the_cap_test")

    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned before refusing --max-cost")

    monkeypatch.setattr(runs.pipeline, "_estimate", no_planning)
    spec = tmp_path / "paid.toml"
    spec.write_text(PAID_SPEC.format(prices=""), encoding="utf-8")
    out = tmp_path / "r"
    args = ["run", str(spec), "--max-cost", "5", "--out", str(out)]
    code, output = invoke(*args, *(["--rehearse"] if rehearse else []))
    assert code == 2, output
    assert_one_clean_line(output, "--max-cost $5.00 would cap nothing", "add them")
    assert not out.exists()
    # a cap of a thousandth of a cent was said as "$0.0000", a cap of nothing
    code, output = invoke("run", str(spec), "--max-cost", "0.00001", "--out", str(out))
    assert code == 2, output
    assert_one_clean_line(output, "--max-cost $0.00001 would cap nothing", "add them")
    # A cap with no limit (inf), or a paid model priced, is not refused; neither is a cap on a
    # campaign of the simulator's models alone, which cost nothing.
    for cap, prices, text in (
        ("inf", "", PAID_SPEC),
        ("5", "price_in = 0.15\nprice_out = 0.6", PAID_SPEC),
        ("5", "", SPEC.format(data="", model="m", arm="baseline")),
    ):
        spec.write_text(text.format(prices=prices), encoding="utf-8")
        runs.pipeline.check_cap_counts(load_spec(spec), float(cap))  # raises RunError if not


@pytest.mark.parametrize("ledger_folder", ["responses", "journal", "attempts"])
@pytest.mark.parametrize("command", ["reparse", "score", "repair", "report", "run"])
def test_a_file_where_a_ledger_folder_goes_is_named_by_every_writer(
    tmp_path: Path, finished_runs: FinishedRuns, ledger_folder: str, command: str
) -> None:
    """`reparse`, `score`, `repair` and a resume ended in a NotADirectoryError or
    FileExistsError traceback (exit 1) where `status` and `audit` said it in one line.

    `score`, `repair` and `report` read `attempts/` too: whether `responses/` lost accepted
    answers is told from the ledger's `ok` attempts (`runs.lost_answers`), and a folder
    where that cannot be told is not scored (this test had them score it, exit 0, as when
    they read only the answers). Their files are left as they were."""
    spec, out = finished(finished_runs, tmp_path)
    shutil.rmtree(out / ledger_folder)
    (out / ledger_folder).write_text("in the way", encoding="utf-8")
    args = {
        "reparse": ["reparse", str(out), "--parser", "strict"],
        "score": ["score", str(out), "--spec", str(spec)],
        "repair": ["repair", str(out), "--spec", str(spec)],
        "report": ["report", str(out)],
        "run": ["run", str(spec), "--out", str(out)],
    }[command]
    outputs = ["scores.parquet", "forecasts.parquet", "averaged.parquet", "report/summary.json"]
    before = {name: (out / name).read_bytes() for name in outputs}
    code, output = invoke(*args)
    assert code == 2, output
    assert_one_clean_line(
        output,
        # a resume says so before it plans (`runs.folder_writes`), the others as they read it
        f"{out / ledger_folder} is a file where a folder goes: move or remove it, then run "
        "the same command again",
    )
    assert {name: (out / name).read_bytes() for name in outputs} == before
    assert not (out / "repaired.parquet").exists()


def test_every_model_lacking_its_key_is_named_in_the_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the first model lacking its credentials was named: a campaign of five providers
    took five runs to learn what each lacked."""
    for name in ("GROQ_API_KEY", "DEEPINFRA_API_KEY", "DEEPINFRA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    spec = tmp_path / "keys.toml"
    spec.write_text(
        'name = "keys"\n[data]\nstock_days = 2\n'
        '[[models]]\nname = "g"\nprovider = "groq"\nmodel = "openai/gpt-oss-120b"\n'
        '[[models]]\nname = "s"\nprovider = "sim"\nmodel = "sim-coherent"\n'
        '[[models]]\nname = "d"\nprovider = "deepinfra"\nmodel = "meta-llama/x"\n'
        '[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    code, output = invoke("run", str(spec), "--out", str(tmp_path / "r"))
    assert code == 2, output
    assert_one_clean_line(output, "models[0]", "GROQ_API_KEY", "also lacking", "'d' (deepinfra)")
    assert "'s'" not in output  # the simulator's needs none


@pytest.mark.parametrize(
    ("base_url", "refused"),
    [
        ("http://evil.example/v1", True),
        ("http://192.168.1.5:8000/v1", True),
        ("https://evil.example/v1", False),
        ("http://127.0.0.1:9/v1", False),
        ("http://localhost:9/v1", False),
        ("http://[::1]:9/v1", False),
    ],
)
@pytest.mark.parametrize(
    "provider",
    ["groq", "deepinfra", "azure", "bedrock", "vertex", "openai"],
)
def test_a_key_is_never_sent_in_clear_to_another_host(
    tmp_path: Path, provider: str, base_url: str, refused: bool
) -> None:
    """A spec one was sent could point a provider's key at any host over http:// (an echo
    server received `Authorization: Bearer <key>`): refused before anything is sent, in the
    one line that names every model lacking what it needs, the key never shown; https, and
    a test server on this machine's loopback, are taken. `openai` sends one where
    `api_key_env` names it."""
    spec = tmp_path / "clear.toml"
    spec.write_text(
        'name = "clear"\n[data]\nstock_days = 2\n'
        f'[[models]]\nname = "k"\nprovider = "{provider}"\nmodel = "x"\n'
        f'base_url = "{base_url}"\n'
        + ('api_key_env = "MY_KEY"\n' if provider == "openai" else "")
        + '[[models]]\nname = "d"\nprovider = "deepinfra"\nmodel = "y"\n'
        '[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    from runs.pipeline import check_credentials
    from runs.spec import SpecError

    with pytest.raises(SpecError) as info:
        check_credentials(load_spec(spec), {"MY_KEY": "sk-CANARYabcdefgh12345678"})
    said = str(info.value)
    assert "CANARY" not in said
    assert ("base_url must be an https:// URL" in said) == refused, said
    assert "'d' (deepinfra)" in said or said.startswith(f"{spec}: models[1]"), said


@pytest.mark.parametrize(
    ("root", "refused"),
    [
        ("http://evil.example/openai", True),
        ("https://evil.example/openai", False),
        ("http://127.0.0.1:9/openai", False),
    ],
)
@pytest.mark.parametrize("provider", ["azure", "openai", "keyless openai"])
def test_a_root_from_the_environment_never_takes_a_key_in_clear_to_another_host(
    tmp_path: Path, provider: str, root: str, refused: bool
) -> None:
    """`AZURE_OPENAI_ENDPOINT` (or the variable an `openai` model's `base_url_env` names)
    mistyped http:// sent the key unencrypted to that host, where a spec's `base_url` was
    refused. An `openai` model without `api_key_env` sends no key: any root is taken."""
    keyed = provider != "keyless openai"
    model = (
        'provider = "azure"\nmodel = "dep"\n' if provider == "azure"
        else 'provider = "openai"\nmodel = "x"\nbase_url_env = "MY_ROOT"\n'
        + ('api_key_env = "MY_KEY"\n' if keyed else "")
    )  # fmt: skip
    spec = tmp_path / "env-root.toml"
    spec.write_text(
        f'name = "env-root"\n[data]\nstock_days = 2\n[[models]]\nname = "k"\n{model}'
        '[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    from runs.pipeline import check_credentials
    from runs.spec import SpecError

    env = {"MY_KEY": "sk-CANARYabcdefgh12345678", "AZURE_OPENAI_API_KEY": "CANARYazure0123456789",
           "AZURE_OPENAI_ENDPOINT": root, "MY_ROOT": root}  # fmt: skip
    variable = "AZURE_OPENAI_ENDPOINT" if provider == "azure" else "MY_ROOT"
    if not (refused and keyed):
        check_credentials(load_spec(spec), env)
        return
    with pytest.raises(SpecError) as info:
        check_credentials(load_spec(spec), env)
    said = str(info.value)
    assert "CANARY" not in said and "evil" not in said, said
    assert f"{variable} must be an https:// URL; over http:// its credentials" in said, said


def test_a_read_only_part_of_a_folder_says_to_copy_it() -> None:
    """`responses/` or `logs/` mounted read-only: `reparse` said only "Read-only file
    system: q7/logs/reparses.jsonl", without the whole folder's advice."""
    import errno

    from runs.commands._errors import _describe

    said = _describe(OSError(errno.EROFS, "Read-only file system", "q7/logs/reparses.jsonl"))
    assert said == (
        "Read-only file system: q7/logs/reparses.jsonl (copy the run folder somewhere you can "
        "write, and give it the copy)"
    )


def test_a_run_folder_given_as_the_spec_says_how_a_folder_is_resumed(tmp_path: Path) -> None:
    """`dutchbook run out/quickstart` said "is a folder, not a file", and no more."""
    folder = tmp_path / "quickstart"
    folder.mkdir()
    (folder / "spec.toml").write_text('name = "quickstart"\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(folder)], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    assert (
        f"error: {folder}: is a folder, not a file; to resume a run folder, give the spec "
        f"it was run with and the folder as --out: dutchbook run SPEC --out {folder} (its "
        f"frozen copy {folder / 'spec.toml'} serves as SPEC unless its [data] paths are "
        "relative)"
    ) in " ".join(result.output.split()), result.output
