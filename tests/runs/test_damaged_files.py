"""A damaged Parquet file of a run folder ends a command in one line naming the file.

A finished campaign on the simulator (simulated forecasters) is copied for each check and
one of its files truncated, overwritten or corrupted inside a page, as a failing disk or a
half-finished copy leaves them. Before, each command ended in polars' traceback, which names
no file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.damaged_files import damage_report, damaged_parquet_files
from tests.runs.quiet_campaign import campaign_fixtures
from tests.runs.run_folders import unprivileged
from tests.special_files import put_in_place

SPEC = """
name = "damaged"
seed = 9
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-noisy"
[[arms]]
name = "baseline"
"""


finished, run_dir = campaign_fixtures("damaged", SPEC)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def corrupt_the_pages(path: Path) -> None:
    """Zero every byte between the leading magic and the footer: the footer (schema, row
    count) still reads, no page does."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")  # its length, before the closing magic
    end = len(data) - 8 - footer
    data[4:end] = bytes(end - 4)
    path.write_bytes(bytes(data))


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def one_error_line(output: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    return errors[0]


def test_a_healthy_folder_has_no_damaged_file(finished: Path) -> None:
    assert len(list(finished.rglob("*.parquet"))) >= 6
    assert damaged_parquet_files(finished) == {}


def test_each_kind_of_damage_is_found_and_only_the_damaged_file(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files whose footer fails are named without any file read whole; one damaged inside
    its pages is found by reading whole once every footer reads."""
    shard = sorted((run_dir / "responses").glob("*.parquet"))[0]
    truncate(run_dir / "plan.parquet")
    (run_dir / "averaged.parquet").write_bytes(b"not parquet at all")
    corrupt_the_pages(shard)
    with monkeypatch.context() as patched:
        patched.setattr(pl, "read_parquet", _never_called("a read of a whole file"))
        found = damaged_parquet_files(run_dir)
    assert sorted(found) == sorted([run_dir / "plan.parquet", run_dir / "averaged.parquet"])
    assert all("parquet" in why.lower() for why in found.values()), found
    for path in found:
        path.rename(run_dir.parent / path.name)
    found = damaged_parquet_files(run_dir)
    assert list(found) == [shard]
    assert "parquet" in found[shard].lower(), found


def _never_called(what: str) -> Callable[..., object]:
    def fail(*args: object, **kwargs: object) -> object:
        raise AssertionError(f"{what} was made")

    return fail


@pytest.mark.parametrize(
    "error",
    [
        pl.exceptions.ColumnNotFoundError('unable to find column "answer"'),
        pl.exceptions.SchemaError("data type mismatch for column accepted_at"),
    ],
    ids=["column", "schema"],
)
def test_a_polars_error_of_a_bug_is_not_sent_to_the_damaged_file_search(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """A bug's polars error in a command's read had every Parquet file of the folder read
    whole again, only to end in its traceback (or blame a damaged file it did not come
    from): it is raised as it came, the folder never searched."""
    import runs.audit
    import runs.damaged_files

    def failing(run_dir: Path) -> None:
        raise error

    truncate(run_dir / "averaged.parquet")  # a damaged file the error is not from
    monkeypatch.setattr(runs.damaged_files, "damaged_parquet_files", _never_called("a search"))
    monkeypatch.setattr(runs.audit, "run_audit", failing)
    assert damage_report(run_dir, error) is None
    result = CliRunner().invoke(app, ["audit", str(run_dir)])
    assert result.exception is error, result.output


def test_an_error_that_is_not_a_damaged_file_is_left_alone(run_dir: Path) -> None:
    # Not polars' Parquet error: never diagnosed, whatever the folder holds.
    truncate(run_dir / "plan.parquet")
    assert damage_report(run_dir, ValueError("parquet: something")) is None
    # polars' Parquet error, but every file of the folder reads: not blamed on the folder.
    healthy = run_dir.parent / "healthy"
    shutil.copytree(run_dir, healthy)
    (healthy / "plan.parquet").unlink()
    error = pl.exceptions.ComputeError("parquet: File out of specification: elsewhere")
    assert damage_report(healthy, error) is None


@pytest.mark.parametrize(("folder", "target"), [("logs", "logs"), ("journal", "gone")])
def test_a_folder_of_the_run_that_is_a_link_to_no_folder_is_said_by_every_command(
    run_dir: Path, folder: str, target: str
) -> None:
    """A `logs/` linked to itself ended `score` and `repair` in a traceback ("Too many levels
    of symbolic links"), and `status`, `audit` and `report` in the bare error (a tester's)."""
    link = run_dir / folder
    shutil.rmtree(link)
    link.symlink_to(target)
    for command in ("status", "audit", "score", "repair", "report"):
        code, output = invoke(command, str(run_dir))
        assert code == 2, (command, output)
        assert one_error_line(output) == (
            f"error: {link} is a link to {target}, which leads to no folder, where a folder "
            "goes: move or remove it, then run the same command again"
        ), (command, output)


def test_report_names_a_damaged_scores_file_and_score_writes_it_again(run_dir: Path) -> None:
    truncate(run_dir / "scores.parquet")
    code, output = invoke("report", str(run_dir))
    assert code == 2, output
    line = one_error_line(output)
    assert f"{run_dir / 'scores.parquet'} (parquet:" in line, line
    assert f"`dutchbook score {run_dir}` writes it again" in line, line
    code, output = invoke("score", str(run_dir))
    assert code == 0, output
    assert damaged_parquet_files(run_dir) == {}
    code, output = invoke("report", str(run_dir))
    assert code == 0 and "report: " in output, output


@pytest.mark.parametrize("put", ["missing", "a folder"])
def test_report_says_the_frozen_spec_is_gone_and_the_resume_puts_it_back(
    run_dir: Path, tmp_path: Path, put: str
) -> None:
    """`report` on a run folder whose spec.toml alone was gone said it was "not a run folder
    (no spec.toml)", sending a tester to look for another folder (a tester's)."""
    frozen = run_dir / "spec.toml"
    frozen.unlink()
    if put == "a folder":
        frozen.mkdir()
    code, output = invoke("report", str(run_dir))
    assert code == 2, output
    what, first = ("is not a file", "move it aside, then ") if put == "a folder" else (
        "is missing", ""
    )
    assert one_error_line(output) == (
        f"error: {frozen} {what}: it is the spec the run was started with; {first}`dutchbook "
        f"run SPEC --out {run_dir}` with that spec puts it back"
    ), output
    if put == "a folder":
        frozen.rmdir()
    spec = tmp_path / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    code, output = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 0, output
    code, output = invoke("report", str(run_dir))
    assert code == 0 and "report: " in output, output


@pytest.mark.parametrize(
    ("command", "shards"), [("status", "attempts"), ("audit", "attempts"), ("score", "responses")]
)
def test_folder_commands_name_a_damaged_shard(run_dir: Path, command: str, shards: str) -> None:
    shard = sorted((run_dir / shards).glob("*.parquet"))[0]
    truncate(shard)
    code, output = invoke(command, str(run_dir))
    assert code == 2, output
    line = one_error_line(output)
    assert f"damaged file in the run folder: {shard} (parquet:" in line, line
    if shards == "attempts":
        assert "no command writes it again" in line, line
    else:  # the answers are rebuilt from the replies (test_damaged_responses)
        assert f"`dutchbook reparse {run_dir} --parser strict` rebuilds the answers" in line, line


def _dutchbook(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with a time limit, so that a wait on a FIFO fails."""
    dutchbook = Path(sys.executable).with_name("dutchbook")
    return subprocess.run([str(dutchbook), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("held_by", ["fifo", "/dev/null", "/dev/zero"])
@pytest.mark.parametrize(
    ("command", "shards"), [("status", "attempts"), ("audit", "responses"), ("score", "responses")]
)
def test_folder_commands_name_a_shard_that_is_no_regular_file(
    run_dir: Path, command: str, shards: str, held_by: str
) -> None:
    """A device linked, or a FIFO made, in a shard's place: polars read the device as an
    empty file (its traceback naming no file) and waited on the FIFO for ever, deaf to a
    signal. Run as a user runs it, with a time limit, so that a wait fails the test."""
    shard = sorted((run_dir / shards).glob("*.parquet"))[0]
    shard.unlink()
    put_in_place(shard, held_by)
    what = "a FIFO" if held_by == "fifo" else f"a character device, linked to {held_by}"
    done = _dutchbook(command, str(run_dir))
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stdout + done.stderr)
    assert f"damaged file in the run folder: {shard} (not a regular file but {what}; " in line
    assert "remove it (it holds none of the run's data), then " in line, line
    if shards == "attempts":
        assert "restore from a copy the file it took the place of" in line, line
    else:
        assert f"`dutchbook reparse {run_dir} --parser strict` rebuilds the answers" in line, line


@pytest.mark.parametrize("command", ["status", "report"])
def test_a_fifo_named_report_is_sent_to_report_not_to_a_copy(run_dir: Path, command: str) -> None:
    """`report/` is rebuilt whole from the folder: a FIFO in its place was told to "restore
    from a copy the file it took the place of"."""
    shutil.rmtree(run_dir / "report")
    put_in_place(run_dir / "report", "fifo")
    done = _dutchbook(command, str(run_dir))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done.stdout + done.stderr)
    assert f"{run_dir / 'report'} (not a regular file but a FIFO; remove it" in line, line
    assert f"then `dutchbook report {run_dir}` writes the report again)" in line, line
    assert "copy" not in line, line


@pytest.mark.parametrize(
    ("name", "held_by", "command"),
    [
        ("plan.parquet", "fifo", "status"),
        ("journal/seg-99999999.jsonl", "fifo", "status"),
        ("journal/seg-99999999.jsonl", "/dev/zero", "audit"),
        ("logs/lanes.json", "fifo", "audit"),
        ("design.json", "fifo", "report"),
        ("plan.parquet", "/dev/null", "reparse"),
        ("plan.parquet", "fifo", "run"),
    ],
)
def test_a_folder_command_names_any_special_file_among_the_folders_files(
    run_dir: Path, name: str, held_by: str, command: str
) -> None:
    """Not only shards: a FIFO as the plan, a journal segment or `logs/lanes.json` made
    `status` wait for ever (deaf to SIGTERM), a link to /dev/zero as a segment read without
    end, a link to /dev/null as the plan said "No such device" naming no file. Each command
    now names the file in one line before it reads the folder, and a resume sends nothing."""
    path = run_dir / name
    path.unlink(missing_ok=True)
    put_in_place(path, held_by)
    what = "a FIFO" if held_by == "fifo" else f"a character device, linked to {held_by}"
    spec = run_dir.parent / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    args = [command, str(run_dir)]
    if command == "run":
        args = ["run", str(spec), "--out", str(run_dir)]
    attempts_before = sorted(p.name for p in (run_dir / "attempts").iterdir())
    done = _dutchbook(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done.stdout + done.stderr)
    assert f"damaged file in the run folder: {path} (not a regular file but {what}; " in line
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == attempts_before


@pytest.mark.parametrize(
    ("name", "then"),
    [
        ("responses/part-00000001.parquet", ("reparse", "--parser", "strict")),
        ("scores.parquet", ("score",)),
        ("logs/lanes.json", ()),
    ],
)
def test_following_the_advice_for_a_fifo_clears_the_refusal(
    run_dir: Path, name: str, then: tuple[str, ...]
) -> None:
    """The advice is to remove it and then what writes it again. (It was the damaged
    Parquet file's: rename it `.damaged`, which every command then refused in its turn, or
    `dutchbook score`, which was refused by the same check.)"""
    path = run_dir / name
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    refused = _dutchbook("status", str(run_dir))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = one_error_line(refused.stdout + refused.stderr)
    assert "remove it (it holds none of the run's data), then " in line, line
    if then:
        assert f"`dutchbook {then[0]} {run_dir}" in line, line
    path.unlink()
    if then:
        assert _dutchbook(then[0], str(run_dir), *then[1:]).returncode == 0
    after = _dutchbook("status", str(run_dir))
    assert after.returncode == 0, after.stdout + after.stderr
    assert "missing" not in after.stdout + after.stderr


@pytest.mark.parametrize("folder", ["journal", "responses"])
def test_a_fifo_in_a_linked_folder_of_the_run_is_named(
    run_dir: Path, tmp_path: Path, folder: str
) -> None:
    """A run folder's `journal/` or `responses/` linked elsewhere is read as the run's: a FIFO
    there made every command wait for ever (journal/) or end in a traceback (responses/:
    the shard listing refused it, and the damage search, which did not follow the link,
    found nothing to name)."""
    elsewhere = tmp_path / f"{folder}-elsewhere"
    shutil.move(run_dir / folder, elsewhere)
    (run_dir / folder).symlink_to(elsewhere, target_is_directory=True)
    fifo = run_dir / folder / "part-00000009.parquet"
    if folder == "journal":
        fifo = run_dir / folder / "seg-99999999.jsonl"
    os.mkfifo(fifo)
    done = _dutchbook("status", str(run_dir))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{fifo} (not a regular file but a FIFO; " in one_error_line(done.stdout + done.stderr)


def test_a_folder_of_the_run_that_cannot_be_listed_is_said_not_passed_over(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`os.walk` passes over a folder it may not list unless told; what hides there (a
    FIFO as the plan, say) would be read by name all the same. (Simulated: this suite may
    run as root, whom permissions do not stop.)"""
    import runs.damaged_files as damaged_files

    walk = os.walk

    def refusing(
        top: str, onerror: Callable[[OSError], object], followlinks: bool = False
    ) -> Iterator[tuple[str, list[str], list[str]]]:
        for entry in walk(top, onerror=onerror, followlinks=followlinks):
            if entry[0].endswith("logs"):
                onerror(PermissionError(13, "Permission denied", entry[0]))
            yield entry

    monkeypatch.setattr(os, "walk", refusing)
    line = damaged_files.special_files_report(run_dir)
    assert line == (
        f"cannot look in {run_dir / 'logs'} (Permission denied), a folder of the run {run_dir}"
    )


def test_reparse_names_a_shard_damaged_inside_its_pages(run_dir: Path) -> None:
    shard = sorted((run_dir / "responses").glob("*.parquet"))[0]
    corrupt_the_pages(shard)
    code, output = invoke("reparse", str(run_dir), "--parser", "strict")
    assert code == 2, output
    assert f"{shard} (parquet:" in one_error_line(output)


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "planned-before-them"])
def test_a_resume_names_a_damaged_plan_and_sends_nothing(run_dir: Path, checksums: bool) -> None:
    """Named by its checksum (`runs.plan_checksums`), or, in a folder planned before they
    were kept, by polars' error; either way with what mends it (the same plan made again),
    not "run the spec into a new folder", which would pay for every answer again."""
    from runs.plan_checksums import CHECKSUMS_FILE, REPLAN

    truncate(run_dir / "plan.parquet")
    if not checksums:
        (run_dir / CHECKSUMS_FILE).unlink()
    attempts_before = sorted(p.name for p in (run_dir / "attempts").iterdir())
    spec = run_dir.parent / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    code, output = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 2, output
    line = one_error_line(output)
    said = "is damaged: not what was written" if checksums else "(parquet:"
    assert f"{run_dir / 'plan.parquet'} {said}" in line, line
    assert REPLAN in line, line
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == attempts_before
    assert not (run_dir / "run.pid").exists()


@pytest.mark.parametrize("shards", ["attempts", "responses"])
def test_a_resume_names_a_damaged_shard_before_any_lane_starts(run_dir: Path, shards: str) -> None:
    """Every lane reads the shards to skip what is answered: each used to stop with polars'
    error ("internal error: ComputeError ..."), the run's last line naming the file only
    after them."""
    shard = sorted((run_dir / shards).glob("*.parquet"))[0]
    truncate(shard)
    spec = run_dir.parent / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    code, output = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 2, output
    assert f"{shard} (parquet:" in one_error_line(output)
    assert "internal error" not in output and "ComputeError" not in output, output
    assert not (run_dir / "run.pid").exists()


#: The footer bit search, run in a process of its own (`flip_a_footer_bit`): argv is the
#: file, the bytes (hex) after which to search, polars' error class wanted, the first try.
#: Each try (byte * 8 + bit) is said before it is made, so a crash names the one to pass.
_FOOTER_SEARCH = """
import io, resource, sys
import polars as pl
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[5]), int(sys.argv[5])))
path, after, wanted, first = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], int(sys.argv[4])
data = open(path, "rb").read()
footer = int.from_bytes(data[-8:-4], "little")  # its length, before the closing magic
start = data.index(after, len(data) - 8 - footer) * 8
kind = getattr(pl.exceptions, wanted)
for n in range(max(start, first), (len(data) - 8) * 8):
    print("try", n, flush=True)
    flipped = bytearray(data)
    flipped[n // 8] ^= 1 << (n % 8)
    try:
        pl.read_parquet_schema(io.BytesIO(bytes(flipped)))
    except BaseException as exc:
        if isinstance(exc, kind):
            print("found", n, flush=True)
            break
"""
#: Address space for the search's process: a flip that has polars ask for exabytes fails
#: there at once (and the search goes on past it) rather than pressing the machine's memory.
_SEARCH_MEMORY = 4 << 30
#: Searches started again past a try that crashed the search's process, at most.
_SEARCH_RESTARTS = 5


def flip_a_footer_bit(path: Path, after: bytes, wanted: type[BaseException]) -> None:
    """Flip the first bit of `path`'s footer from `after` on whose flip makes polars raise
    `wanted` reading the footer, as a disk's bit rot leaves a file: the footer's metadata,
    unchecked by any checksum, decodes to nonsense. Searched for, as where a field lies
    depends on the file's contents (the answers' timestamps among them), each try a read
    from memory; in a process of its own, as some flips make polars abort (SIGABRT) or ask
    for more memory than there is, which would end the test's own process."""
    first = 0
    for _ in range(_SEARCH_RESTARTS):
        searched = subprocess.run(
            [sys.executable, "-c", _FOOTER_SEARCH, str(path), after.hex(), wanted.__name__,
             str(first), str(_SEARCH_MEMORY)],
            capture_output=True, text=True, env={**os.environ, "RUST_BACKTRACE": "0"},
            check=False, timeout=120,
        )  # fmt: skip
        said = searched.stdout.split()
        if said[-2:-1] == ["found"]:
            data = bytearray(path.read_bytes())
            data[int(said[-1]) // 8] ^= 1 << (int(said[-1]) % 8)
            path.write_bytes(bytes(data))
            return
        if searched.returncode == 0 or said[-2:-1] != ["try"]:
            break  # searched to the end, or failed before its first try
        first = int(said[-1]) + 1  # the try that crashed it, passed
    pytest.fail(f"no bit flipped in {path}'s footer raises {wanted.__name__}: {searched.stderr}")


@pytest.mark.parametrize(
    ("after", "wanted"),
    [
        # A letter of the schema's base64 made one that is none: "unable to decode the
        # encoded schema stored in ARROW:schema, InvalidByte(...)", naming no Parquet.
        (b"ARROW:schema", pl.exceptions.InvalidOperationError),
        # A column's compressed size one off, say: a panic ("called `Option::unwrap()` on a
        # `None` value"), a BaseException that `except Exception` let by.
        (b"", pl.exceptions.PanicException),
    ],
    ids=["schema", "panic"],
)
def test_every_command_names_a_shard_with_a_bit_flipped_in_its_footer(
    run_dir: Path, after: bytes, wanted: type[BaseException]
) -> None:
    """status, audit, score, report and a resume each ended in polars' traceback (or the
    panic's), naming no file."""
    shard = sorted((run_dir / "responses").glob("*.parquet"))[0]
    flip_a_footer_bit(shard, after, wanted)
    spec = run_dir.parent / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    attempts_before = sorted(p.name for p in (run_dir / "attempts").iterdir())
    # the resume last: it may write what the other commands read (its own log, say)
    for args in (*([c, str(run_dir)] for c in ("status", "audit", "score", "report")),
                 ["run", str(spec), "--out", str(run_dir)]):  # fmt: skip
        code, output = invoke(*args)
        assert code == 2, (args, output)
        line = one_error_line(output)
        assert line.startswith(f"error: damaged file in the run folder: {shard} ("), line
        assert f"move it aside (rename it to {shard.name}.damaged, say), then " in line, line
        assert f"`dutchbook reparse {run_dir} --parser strict` rebuilds the answers" in line
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == attempts_before


def test_the_search_follows_a_link_for_a_folder_of_the_run_not_one_deeper(run_dir: Path) -> None:
    """A link deeper down (to `/`, say) would make every `status` walk the whole disk."""
    from runs.damaged_files import _files_of

    (run_dir / "logs" / "up").symlink_to("/", target_is_directory=True)
    files = list(_files_of(run_dir))
    assert not any((run_dir / "logs" / "up") in path.parents for path in files)
    assert run_dir / "logs" / "lanes.json" in files


@pytest.mark.parametrize(
    ("name", "commands"),
    [
        # polars read a folder there as "expanded paths were empty": a traceback each
        ("plan.parquet", ("status", "audit", "reparse")),
        ("plan_members.parquet", ("report", "score", "repair")),
        # read by the figures alone (`DUTCHBOOK_FIGURES=0` reads no such file)
        pytest.param("forecasts.parquet", ("report",), marks=pytest.mark.figures),
        ("averaged.parquet", ("report",)),
        # read as a shard of no rows: every answer "had no recorded attempt", no file named
        ("attempts/part-00000001.parquet", ("status", "audit", "score", "report", "reparse")),
        ("responses/part-00000001.parquet", ("status", "audit", "score", "reparse")),
    ],
)
def test_a_folder_where_a_parquet_file_goes_is_named_in_one_line(
    run_dir: Path, name: str, commands: tuple[str, ...]
) -> None:
    path = run_dir / name
    assert path.is_file()
    path.unlink()
    path.mkdir()
    for command in commands:
        args = [command, str(run_dir)] + (["--parser", "strict"] if command == "reparse" else [])
        code, output = invoke(*args)
        assert code == 2, (command, output)
        line = one_error_line(output)
        assert f"{path} (a folder where a file goes;" in line, (command, line)


def test_a_shard_this_user_may_not_read_ends_score_and_repair_in_one_line(run_dir: Path) -> None:
    """`score` and `repair` ended in a PermissionError's traceback (`status`, `audit` and
    `report` said it in one line)."""
    shard = sorted((run_dir / "attempts").glob("*.parquet"))[0]
    shard.chmod(0)
    try:
        for command in ("score", "repair"):
            done = subprocess.run(
                unprivileged([sys.executable, "-m", "runs.cli", command, str(run_dir)]),
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 2, (command, done.stderr)
            line = one_error_line(done.stderr)
            assert f"this user may not read {shard}: give it read access" in line, line
    finally:
        shard.chmod(0o644)


@pytest.mark.parametrize("name", ["spec.toml", "design.json"])
def test_a_resume_says_a_record_this_user_may_not_read_is_unreadable_not_damaged(
    run_dir: Path, tmp_path: Path, name: str
) -> None:
    """The resume called an unreadable spec.toml or design.json "damaged ([Errno 13]
    Permission denied)" and said to put it back (a tester's)."""
    spec = tmp_path / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    record = run_dir / name
    record.chmod(0)
    try:
        done = subprocess.run(
            unprivileged([sys.executable, "-m", "runs.cli", "run", str(spec), "--out",
                          str(run_dir)]),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        record.chmod(0o644)
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_error_line(done.stderr) == (
        f"error: this user may not read {record}: give it read access, then run the same "
        "command again"
    )


def test_report_without_scores_names_a_bad_journal_line_before_advising_score(
    run_dir: Path,
) -> None:
    """A folder with no scores yet and a bad line inside a journal segment (not a crash's:
    a disk fault or an edit): `report` said to run `score`, which then refused the line."""
    (run_dir / "scores.parquet").unlink()
    segment = run_dir / "journal" / "seg-00000099.jsonl"
    segment.parent.mkdir(exist_ok=True)
    segment.write_bytes(b'{"a": 1}\nGARBAGE\n{"b": 2}\n')
    lines = []
    for command in ("report", "score"):
        code, output = invoke(command, str(run_dir))
        assert code == 2, (command, output)
        lines.append(one_error_line(output))
    assert lines[0] == lines[1], lines
    assert lines[0].startswith(f"error: {segment}: line 2 of 3 is corrupt"), lines[0]


def _journal_lines_of_an_answer(run_dir: Path) -> tuple[bytes, bytes]:
    """A dispatch line and the result line of an answer the folder holds, as the ledger
    wrote them before they were folded into the shards."""
    from engine.records import AttemptRecord, ResponseRecord, iso_utc

    attempt = AttemptRecord.from_row(pl.read_parquet(run_dir / "attempts").row(0, named=True))
    answers = pl.read_parquet(run_dir / "responses")
    response = answers.filter(pl.col("request_id") == attempt.request_id).row(0, named=True)
    dispatch = {"kind": "dispatch", "request_id": attempt.request_id,
                "attempt": attempt.attempt, "model": attempt.model,
                "provider": attempt.provider, "started_at": iso_utc(attempt.started_at)}
    result = {"kind": "result", "attempt": attempt.to_row(),
              "response": ResponseRecord.from_row(response).to_row()}
    return orjson.dumps(dispatch), orjson.dumps(result)


def test_every_command_names_a_journal_line_with_a_rotted_key(run_dir: Path) -> None:
    """A result line whose attempt's "request_id" lost a bit ("request_ie"), in the middle of
    a segment: `status` and `audit` ended in a KeyError's traceback; `score` and a resume
    said an answer was missing and sent the user to `reparse`, which said a later version
    had written the folder. Each now names the line, as it does a line that does not parse."""
    dispatch, result = _journal_lines_of_an_answer(run_dir)
    rotted = result.replace(b'"request_id"', b'"request_ie"', 1)
    segment = run_dir / "journal" / "seg-00000099.jsonl"
    segment.parent.mkdir(exist_ok=True)
    segment.write_bytes(b"\n".join([dispatch, rotted, dispatch]) + b"\n")
    spec = run_dir.parent / "damaged.toml"
    spec.write_text(SPEC, encoding="utf-8")
    said = (
        f"error: {segment}: line 2 of 3 is corrupt (a result line, but its attempt has no "
        "request_id); mend or delete that line and run again (a deleted result is asked again)"
    )
    for args in (*([c, str(run_dir)] for c in ("status", "audit", "score", "report")),
                 ["reparse", str(run_dir), "--parser", "strict"],
                 ["run", str(spec), "--out", str(run_dir)]):  # fmt: skip
        code, output = invoke(*args)
        assert code == 2, (args, output)
        assert one_error_line(output) == said, args


def test_a_denied_write_is_not_blamed_on_another_unreadable_file(run_dir: Path) -> None:
    """polars' PermissionError names no file: every unreadable file of the folder was named
    (an unrelated log) where the write of a new shard was what failed. Its own words are
    said, with what to do, as for any other path this user may not write (they had none)."""
    (run_dir / "logs" / "engine.jsonl").chmod(0)
    (run_dir / "responses").chmod(0o555)
    try:
        done = subprocess.run(
            unprivileged([sys.executable, "-m", "runs.cli", "reparse", str(run_dir),
                          "--parser", "strict"]),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        (run_dir / "responses").chmod(0o755)
        (run_dir / "logs" / "engine.jsonl").chmod(0o644)
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stderr)
    assert "engine.jsonl" not in line and "Permission denied" in line, line
    assert "responses/" in line, line
    assert line.endswith("give it the access it lacks, then run the same command again)"), line


def test_a_shard_that_is_a_link_in_a_loop_is_named_by_every_command(run_dir: Path) -> None:
    """`score`, `repair` and a resume ended in "Too many levels of symbolic links"."""
    shard = sorted((run_dir / "responses").glob("*.parquet"))[0]
    shard.unlink()
    shard.symlink_to(shard.name)  # itself
    for command in ("score", "repair", "status", "audit", "report"):
        code, output = invoke(command, str(run_dir))
        assert code == 2, (command, output)
        assert f"{shard} (not a regular file but a link in a loop" in one_error_line(output)


@pytest.mark.parametrize(("name", "writer"), [("scores.parquet", "score"),
                                              ("repaired.parquet", "repair")])
def test_a_folder_where_an_output_goes_is_said_before_anything_is_done(
    run_dir: Path, name: str, writer: str
) -> None:
    """`score` did all its scoring, committed forecasts.parquet, then failed at the swap;
    `status` said the folder "is damaged (its footer does not read)"."""
    path = run_dir / name
    path.unlink(missing_ok=True)  # a run writes no repaired.parquet
    path.mkdir()
    forecasts = (run_dir / "forecasts.parquet").stat().st_mtime_ns
    code, output = invoke(writer, str(run_dir))
    assert code == 2, output
    assert one_error_line(output) == (
        f"error: {path} is a folder where a file goes: move or remove it, then run the same "
        "command again"
    )
    assert (run_dir / "forecasts.parquet").stat().st_mtime_ns == forecasts
    if writer == "score":
        code, output = invoke("status", str(run_dir))
        said = f"{path} is a folder where a file goes: move or remove it, then `dutchbook "
        assert said in output, output
    other = "repair" if writer == "score" else "score"
    assert invoke(other, str(run_dir))[0] == 0  # a folder it does not write is not its business
