"""Faults 1 and 7 of issue 9: a resume may not mix two designs, and may change operations.

1. Data edited between runs: the folder records a digest of every input file (the shipped
   ones included) and refuses a resume whose files differ, naming each changed file.
7. A different spec: operational settings (timeout, rate limits, prices...) may change and are
   recorded in `spec-history.jsonl`; design settings may not, and the refusal names the keys.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from engine.ledger import scan_attempts
from panels.families import FamilyError
from runs.design import fingerprint, spec_changes
from runs.pipeline import RunError, run_campaign
from runs.spec import load_spec
from tests.runs.coin_family import coin_family
from tests.runs.run_folders import FinishedRuns
from tests.special_files import put_in_place

DUTCHBOOK = str(Path(sys.executable).with_name("dutchbook"))

SPEC = """
name = "design"
seed = 5
max_attempts = {max_attempts}
[data]
stock_days = 2
families = "{families}"
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
timeout_s = {timeout}
temperature = {temperature}
[[arms]]
name = "baseline"
[[arms]]
name = "families/isolated"
"""

def write(tmp_path: Path, *, timeout: float = 30, temperature: float = 0,
          max_attempts: int = 8, text: str = "A fair coin lands heads.",
          families: Path | None = None) -> Path:  # fmt: skip
    """`tmp_path/spec.toml`, its families `tmp_path/families` (the coin family of `text`,
    written here), or `families`, another spec's, left as they are."""
    if families is None:
        families = tmp_path / "families"
        families.mkdir(exist_ok=True)
        (families / "coin.toml").write_text(coin_family(heads_text=text), encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        SPEC.format(families=families.as_posix(), timeout=timeout, temperature=temperature,
                    max_attempts=max_attempts),
        encoding="utf-8",
    )  # fmt: skip
    return spec


def run(spec: Path, out: Path) -> None:
    console = Console(file=io.StringIO(), width=200)
    asyncio.run(run_campaign(spec, out, console=console, progress=False))


@pytest.fixture(scope="module")
def finished_run(finished_runs: FinishedRuns) -> tuple[Path, Path]:
    """The spec (`write`) and a finished run of it, which tests that only resume it copy:
    run once a session, for every worker. Its families are read, never changed (a test
    that edits them runs its own)."""
    made = finished_runs.made("resume-design-run", lambda root: run(write(root), root / "run"))
    return made / "spec.toml", made / "run"


def test_a_data_file_edited_between_runs_is_refused_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(write(tmp_path), out)
    design = orjson.loads((out / "design.json").read_bytes())
    assert set(design["files"]) == {"returns (embedded)", "families/coin.toml"}
    attempts = scan_attempts(out).collect().height
    write(tmp_path, text="A fair coin, tossed once, lands heads.")  # the family file edited
    with pytest.raises(RunError, match=r"planned from other data: families/coin\.toml .* changed"):
        run(tmp_path / "spec.toml", out)
    assert scan_attempts(out).collect().height == attempts  # nothing sent, nothing lost
    write(tmp_path)  # the original back: the resume goes through
    run(tmp_path / "spec.toml", out)


@pytest.mark.parametrize("command", ["score", "repair", "run"])
def test_a_fifo_among_the_family_files_is_refused_before_the_design_is_hashed(
    finished_run: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    """`score --spec`, `repair --spec` and a resume hash the design's files before they read
    them: a FIFO among the family files was opened and waited on for a writer for ever
    (a SIGTERM's line then said to run the command again). Run as a child with a timeout,
    so a wait fails the test instead of hanging it."""
    shutil.copytree(finished_run[1], tmp_path / "run")
    spec = write(tmp_path)
    fifo = tmp_path / "families" / "z.toml"
    os.mkfifo(fifo)
    out = str(tmp_path / "run")
    args = [str(spec), "--out", out] if command == "run" else [out, "--spec", str(spec)]
    done = subprocess.run(
        [DUTCHBOOK, command, *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: {fifo}: is a FIFO, not a family file; move it out of the folder"
    )


_KINDS = {"folder": "a folder", "fifo": "a FIFO", "socket": "a socket",
          "/dev/zero": "a character device"}  # fmt: skip


@pytest.mark.parametrize(
    ("where", "held_by"),
    [("families", "folder"), ("families", "socket"), ("returns", "folder"),
     ("returns", "fifo"), ("returns", "/dev/zero"), ("returns", "socket")],
)  # fmt: skip
def test_a_design_file_that_is_no_file_is_refused_by_score_naming_it(
    finished_run: tuple[Path, Path], tmp_path: Path, where: str, held_by: str
) -> None:
    """`score --spec` hashes the design's files before anything reads them. Opened without
    waiting, a folder there was wrapped by `open(fd)`, which said "Is a directory: 3" (the
    descriptor's number, not the file) and left the descriptor open; a socket said "No such
    device or address". Each is refused, as the loaders refuse it, naming the file. Run as a
    child with a timeout, so a wait on the FIFO fails the test instead of hanging it."""
    shutil.copytree(finished_run[1], tmp_path / "run")
    spec = write(tmp_path)
    odd = tmp_path / ("families/y.toml" if where == "families" else "returns.csv")
    put_in_place(odd, held_by)
    if where == "returns":
        text = spec.read_text(encoding="utf-8")
        spec.write_text(text.replace("[data]\n", f'[data]\nreturns = "{odd}"\n'), "utf-8")
    done = subprocess.run(
        [DUTCHBOOK, "score", str(tmp_path / "run"), "--spec", str(spec)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    wanted = "a family file; move it out of the folder" if where == "families" else (
        "a .csv or .parquet file"
    )
    assert done.returncode == 2, done.stderr
    named = odd.resolve()  # the spec's data paths are resolved: a link names its target
    assert done.stderr.strip() == f"error: {named}: is {_KINDS[held_by]}, not {wanted}"


def test_hashing_a_folder_among_the_design_files_leaves_no_descriptor_open(
    tmp_path: Path,
) -> None:
    """`open(fd)` refused the folder's descriptor and left it open: one more each time."""
    spec = load_spec(write(tmp_path))
    (tmp_path / "families" / "y.toml").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises((FamilyError, OSError)) as raised:  # OSError: as it was
            fingerprint(spec)
    assert len(os.listdir("/proc/self/fd")) == before
    assert isinstance(raised.value, FamilyError), raised.value
    said = "y.toml: is a folder, not a family file; move it out of the folder"
    assert str(raised.value).endswith(said)


def test_operational_changes_resume_and_are_recorded(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out, families = tmp_path / "run", finished_run[0].parent / "families"
    shutil.copytree(finished_run[1], out)  # run with `write`'s timeout of 30 s
    run(write(tmp_path, timeout=120, max_attempts=12, families=families), out)
    lines = (out / "spec-history.jsonl").read_bytes().splitlines()
    history = [orjson.loads(line) for line in lines]
    assert [h["changed"] for h in history] == [[], ["max_attempts", "models[m].timeout_s"]]
    assert "timeout_s = 120" in (out / "spec.toml").read_text(encoding="utf-8")


def test_design_changes_are_refused_naming_the_keys(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out, families = tmp_path / "run", finished_run[0].parent / "families"
    shutil.copytree(finished_run[1], out)
    with pytest.raises(RunError, match=r"different design; changed: models\[m\]\.temperature \("):
        run(write(tmp_path, temperature=0.7, timeout=99, families=families), out)
    assert len((out / "spec-history.jsonl").read_bytes().splitlines()) == 1


def test_spec_changes_sorts_design_from_operations() -> None:
    old = 'seed = 1\n[data]\nreturns = "a.csv"\n[[models]]\nname = "x"\nrpm = 10\nmodel = "a"\n'
    new = 'seed = 2\n[data]\nreturns = "b/a.csv"\n[[models]]\nname = "x"\nrpm = 20\nmodel = "b"\n'
    assert spec_changes(old, new) == (["models[x].model", "seed"], ["models[x].rpm"])


def test_max_down_s_may_be_set_changed_or_dropped_on_resume() -> None:
    """How long a lane waits out an outage is when to give up, not what is asked: a run
    left probing overnight is resumed with a limit, or without one."""
    old = '[[models]]\nname = "x"\nmodel = "a"\n'
    limited = old + "max_down_s = 600\n"
    for before, after in ((old, limited), (limited, limited.replace("600", "60")),
                          (limited, old)):  # fmt: skip
        assert spec_changes(before, after) == ([], ["models[x].max_down_s"])


def test_an_anchor_date_is_design_in_either_form() -> None:
    base = '[data]\nstock_days = 4\nanchor_from = "2021-03-01"\n'
    assert spec_changes(base, base.replace('"2021-03-01"', "2021-03-01")) == ([], [])
    moved = base.replace('"2021-03-01"', "2021-03-02")
    assert spec_changes(base, moved) == (["data.anchor_from"], [])
    assert spec_changes(base, base + "anchor_to = 2021-12-31\n") == (["data.anchor_to"], [])


def test_prices_and_their_provenance_may_change_on_resume() -> None:
    old = '[[models]]\nname = "x"\nmodel = "a"\nprice_in = 1\n'
    new = (
        '[[models]]\nname = "x"\nmodel = "a"\nprice_in = 2\nbatch_price_in = 1\n'
        'batch_price_out = 4\nprice_date = "2026-11-30"\nprice_source = "https://e.com/p"\n'
    )
    keys = ["batch_price_in", "batch_price_out", "price_date", "price_in", "price_source"]
    assert spec_changes(old, new) == ([], [f"models[x].{k}" for k in keys])


@pytest.mark.parametrize(
    ("name", "damage", "words"),
    [
        ("spec.toml", b"garbage{", r"spec\.toml is damaged \(Expected '='.*\): it is the spec "
         r"this folder was run with; put it back \(the text of each version is in "
         r"spec-history\.jsonl\)"),
        ("spec.toml", b"\xff\xfe", r"spec\.toml is damaged \('utf-8' codec"),
        ("design.json", b"garbage{", r"design\.json is damaged \(unexpected character.*\): it "
         r"records the data files this folder was planned from; put it back, or delete it"),
        ("design.json", b'{"files": [1]}', r"design\.json is damaged \(not the record"),
    ],
)  # fmt: skip
def test_a_damaged_record_of_the_design_is_named_and_nothing_is_sent(
    tmp_path: Path, name: str, damage: bytes, words: str, finished_run: tuple[Path, Path]
) -> None:
    # Both used to end a resume in the parser's traceback.
    spec, out = finished_run[0], tmp_path / "run"
    shutil.copytree(finished_run[1], out)
    attempts = scan_attempts(out).collect().height
    original = (out / name).read_bytes()
    (out / name).write_bytes(damage)
    with pytest.raises(RunError, match=words):
        run(spec, out)
    assert scan_attempts(out).collect().height == attempts
    if name == "design.json":  # deleting it, as the message offers, resumes and records anew
        (out / name).unlink()
    else:
        (out / name).write_bytes(original)
    run(spec, out)
    assert orjson.loads((out / "design.json").read_bytes())["files"]


def test_many_changed_inputs_are_counted_past_the_first_five() -> None:
    """Adding a families folder to a finished folder's spec named every shipped file and
    every new one with its path, in a refusal of 6.7 KB on one line."""
    from runs.design import said_changes

    changed = [f"families/f{i}.toml (/x/f{i}.toml) is new" for i in range(43)]
    said = said_changes(changed)
    assert said.startswith("; ".join(changed[:5])) and said.endswith("; and 38 more input files")
    assert len(said) < 300
    assert said_changes(changed[:5]) == "; ".join(changed[:5])
    assert said_changes(changed[:6]).endswith("; and 1 more input file")


ARMED = """
[[models]]
name = "a"
model = "sim-coherent"
[[models]]
name = "b"
model = "sim-noisy"
[[arms]]
name = "baseline"
[[arms]]
name = "families/isolated"
passes = 2
"""


@pytest.mark.parametrize(
    "same",
    [
        ARMED.replace('name = "baseline"\n', 'name = "baseline"\npasses = 1\n'),
        ARMED.replace('name = "baseline"\n', 'name = "baseline"\nmodels = ["b", "a"]\n'),
        ARMED.replace('name = "baseline"\n', 'name = "baseline"\nmodels = ["a"]\n')
        + '[[arms]]\nname = "baseline"\nmodels = ["b"]\n',
        ARMED.replace(
            '[[arms]]\nname = "baseline"\n[[arms]]\nname = "families/isolated"\npasses = 2\n',
            '[[arms]]\nname = "families/isolated"\npasses = 2\n[[arms]]\nname = "baseline"\n',
        ),
        "seed = 0\nparser = \"strict\"\n" + ARMED + "[data]\nstock_days = 100\n",
    ],
    ids=["passes-1", "every-model", "split", "arms-swapped", "defaults"],
)
def test_an_equivalent_spec_is_the_same_design(same: str) -> None:
    """A tester's arms swapped, an arm's default `passes = 1` or `models` (every model)
    written out, and `stock_days = 100` written out were each refused as another design."""
    assert spec_changes(ARMED, same) == ([], [])


@pytest.mark.parametrize(
    ("other", "changed"),
    [
        (ARMED.replace("passes = 2", "passes = 3"), ["arms[families/isolated].passes"]),
        (
            ARMED.replace('name = "baseline"\n', 'name = "baseline"\nmodels = ["a"]\n'),
            ["arms[baseline].models"],
        ),
        (
            ARMED.replace('name = "baseline"\n', 'name = "baseline"\nmodels = ["a"]\n')
            + '[[arms]]\nname = "baseline"\nmodels = ["b"]\npasses = 2\n',
            ["arms[baseline].passes"],
        ),
        (ARMED + '[[arms]]\nname = "complement-pairs"\n', ["arms[complement-pairs]"]),
        (ARMED.replace('[[arms]]\nname = "baseline"\n', ""), ["arms[baseline]"]),
        (ARMED + "[data]\nstock_days = 50\n", ["data.stock_days"]),
        ("seed = 3\n" + ARMED, ["seed"]),
    ],
    ids=["passes", "models", "one-model's-passes", "added", "removed", "stock_days", "seed"],
)
def test_a_real_change_is_named_by_arm_and_key(other: str, changed: list[str]) -> None:
    assert spec_changes(ARMED, other) == (changed, [])


def test_a_folder_resumes_with_its_arms_swapped_and_defaults_written_out(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """End to end: the folder's spec.toml as it was written, the resume's arms in the other
    order with `passes = 1` and `models` (every model) spelt out, is one design
    (a tester's was refused "changed: arms"); `passes = 2` is still refused, by name."""
    out, families = tmp_path / "run", finished_run[0].parent / "families"
    shutil.copytree(finished_run[1], out)
    spec = write(tmp_path, families=families)
    arms = '[[arms]]\nname = "baseline"\n[[arms]]\nname = "families/isolated"\n'
    swapped = '[[arms]]\nname = "families/isolated"\nmodels = ["m"]\n[[arms]]\nname = "baseline"\n'
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace(arms, swapped + "passes = 1\n"), encoding="utf-8")
    run(spec, out)
    spec.write_text(text.replace(arms, swapped + "passes = 2\n"), encoding="utf-8")
    with pytest.raises(RunError, match=r"changed: arms\[baseline\]\.passes \("):
        run(spec, out)


def test_the_shipped_inputs_named_in_the_spec_are_the_same_inputs() -> None:
    """A tester's resume naming the shipped families folder (the very files the run took by
    default) was refused as "families (shipped)/... is no longer an input": the contents
    decide, whichever way the files are labelled; another content is still named."""
    from runs.design import changed_files

    def files(prefix: str, returns: str, sha: str) -> dict[str, object]:
        return {"files": {
            f"{prefix}/a.toml": {"path": f"/p/{prefix}/a.toml", "sha256": sha},
            returns: {"path": f"/p/{returns}.csv", "sha256": "r"},
        }}  # fmt: skip

    shipped = files("families (shipped)", "returns (embedded)", "1")
    assert changed_files(shipped, files("families", "returns", "1")) == []
    assert changed_files(files("families", "returns", "1"), shipped) == []
    assert changed_files(shipped, files("families", "returns", "2")) == [
        "families/a.toml (/p/families/a.toml) changed"
    ]


def test_a_folder_run_on_the_shipped_families_resumes_naming_their_folder(
    tmp_path: Path,
) -> None:
    from panels.families import FAMILIES_DIR

    spec, out = tmp_path / "spec.toml", tmp_path / "run"
    text = SPEC.format(families="", timeout=30, temperature=0, max_attempts=8)
    spec.write_text(text.replace('families = ""\n', "").replace(
        '[[arms]]\nname = "baseline"\n', ""), encoding="utf-8")  # fmt: skip
    run(spec, out)
    assert all(label.startswith("families (shipped)/")
               for label in orjson.loads((out / "design.json").read_bytes())["files"])  # fmt: skip
    named = text.replace('""', f'"{FAMILIES_DIR.as_posix()}/"')
    spec.write_text(named.replace('[[arms]]\nname = "baseline"\n', ""), encoding="utf-8")
    run(spec, out)


SIMULATED = """
[[models]]
name = "a"
provider = "sim"
model = "sim-coherent"
[[models]]
name = "b"
provider = "sim"
model = "sim-x"
[[arms]]
name = "baseline"
"""


def _set(spec: str, model: str, line: str) -> str:
    """`spec` with `line` added to the `[[models]]` table named `model`."""
    return spec.replace(f'name = "{model}"\n', f'name = "{model}"\n{line}\n', 1)


@pytest.mark.parametrize(
    "line", ["json_mode = false", "fold_system = false", 'personality = "coherent"'],
)
def test_a_model_option_written_at_what_the_engine_uses_is_the_same_design(line: str) -> None:
    """A model option left out and written out at the value the run uses without it (the
    `ModelConfig` default; the personality a sim id names, which the id decides) were
    refused on resume as "changed: models[a].<key>"."""
    assert spec_changes(SIMULATED, _set(SIMULATED, "a", line)) == ([], [])
    assert spec_changes(_set(SIMULATED, "a", line), SIMULATED) == ([], [])


@pytest.mark.parametrize(
    ("model", "line", "key"),
    [
        ("a", "json_mode = true", "json_mode"),
        ("a", "fold_system = true", "fold_system"),
        # No default is sent in their place: left out, the provider's own applies.
        ("a", "temperature = 1.0", "temperature"),
        ("a", "max_tokens = 8192", "max_tokens"),
        # An id naming no personality is sent as the one written (`sim-noisy`), which answers
        # otherwise than the id's own pick, whichever personality that pick is.
        ("b", 'personality = "noisy"', "personality"),
        ("b", 'personality = "coherent"', "personality"),
    ],
)
def test_a_model_option_that_changes_the_requests_is_named(
    model: str, line: str, key: str
) -> None:
    assert spec_changes(SIMULATED, _set(SIMULATED, model, line)) == ([f"models[{model}].{key}"], [])


def test_a_model_added_or_removed_is_named_once() -> None:
    """Each of its keys was named, and would be with the options it leaves out filled in; the
    arms running every model (the default) run one more."""
    added = SIMULATED + '[[models]]\nname = "c"\nprovider = "sim"\nmodel = "sim-noisy"\n'
    assert spec_changes(SIMULATED, added) == (["arms[baseline].models", "models[c]"], [])
    assert spec_changes(added, SIMULATED) == (["arms[baseline].models", "models[c]"], [])


def test_a_folder_resumes_and_scores_with_model_defaults_written_out(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """End to end: `run` (a resume), `score --spec` and `repair --spec` take the folder's
    spec with `json_mode = false` and the personality its sim id names written out, and
    each still names another personality's id, by model and key."""
    from typer.testing import CliRunner

    from runs.cli import app

    out, families = tmp_path / "run", finished_run[0].parent / "families"
    shutil.copytree(finished_run[1], out)
    spec = write(tmp_path, families=families)
    text = spec.read_text(encoding="utf-8")
    spec.write_text(_set(text, "m", 'json_mode = false\npersonality = "coherent"'), "utf-8")
    run(spec, out)
    for command in ("score", "repair"):
        done = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
        assert done.exit_code == 0, done.output
    spec.write_text(text.replace('"sim-coherent"', '"sim-noisy"'), "utf-8")
    for command in ("score", "repair"):
        done = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
        assert done.exit_code == 2, done.output
        said = " ".join(done.output.split())
        assert "changed: models[m].model, models[m].personality;" in said, said


FAMILIES_ONLY = SIMULATED.replace('name = "baseline"', 'name = "families/isolated"')


@pytest.mark.parametrize(
    "data",
    ["stock_days = 50", "anchor_from = 2025-08-15", 'anchor_to = "2025-12-23"'],
)
def test_a_key_only_the_stock_arms_read_is_no_change_where_none_runs(data: str) -> None:
    """A tester's families-only campaign was refused on resume with another `stock_days`,
    which sizes the sample of stock-days no arm of it asks."""
    assert spec_changes(FAMILIES_ONLY, FAMILIES_ONLY + f"[data]\n{data}\n") == ([], [])
    key = "data." + data.split(" = ")[0]
    both = FAMILIES_ONLY + '[[arms]]\nname = "two-asset"\n'
    assert spec_changes(SIMULATED, SIMULATED + f"[data]\n{data}\n") == ([key], [])
    assert spec_changes(both, both + f"[data]\n{data}\n") == ([key], [])


def test_a_families_only_folder_resumes_with_another_stock_days(tmp_path: Path) -> None:
    """End to end: a families-only folder resumes, and is scored and repaired with `--spec`,
    with another `stock_days` and anchor window, which no arm of it reads; the arms it was
    run with still decide (a stock arm added is named, not the keys it would read)."""
    from typer.testing import CliRunner

    from runs.cli import app

    spec, out = write(tmp_path), tmp_path / "run"
    text = spec.read_text(encoding="utf-8")
    families_only = text.replace('[[arms]]\nname = "baseline"\n', "")
    spec.write_text(families_only, encoding="utf-8")
    run(spec, out)
    other = families_only.replace("stock_days = 2\n", "stock_days = 8\nanchor_to = 2020-01-02\n")
    spec.write_text(other, encoding="utf-8")
    run(spec, out)
    for command in ("score", "repair"):
        done = CliRunner().invoke(app, [command, str(out), "--spec", str(spec)])
        assert done.exit_code == 0, done.output
    spec.write_text(other + '[[arms]]\nname = "baseline"\n', encoding="utf-8")
    with pytest.raises(RunError, match=r"changed: arms\[baseline\] \("):
        run(spec, out)
