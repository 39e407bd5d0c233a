"""A finished small campaign to copy, and a folder's files to compare, for the tests of the
commands that rewrite a run folder (`score`, `repair`, `reparse`, `report`)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import app

#: The smallest campaign worth a folder: two stock-days of the baseline arm, one simulated model.
SMALL_SPEC = """
name = "small"
seed = 2
[data]
stock_days = 2
[[models]]
name = "m"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


def fraction_spec(name: str, seed: int, parser: str) -> str:
    """Two stock-days of the baseline arm asked of the simulator's fraction personality,
    whose answers ("11/36") the strict parser rejects and the lenient one accepts."""
    return SMALL_SPEC.replace('name = "small"', f'name = "{name}"').replace(
        "seed = 2", f'seed = {seed}\nparser = "{parser}"'
    ).replace('name = "m"', 'name = "fractions"').replace("sim-coherent", "sim-fraction")


#: The shipped demo's spec.
QUICKSTART = Path(__file__).resolve().parents[2] / "runs" / "specs" / "quickstart.toml"


def quickstart_for_tests(folder: Path) -> Path:
    """The demo's spec written into `folder`.

    Its simulator fails a few requests (the "light" faults), drawn in the order requests
    arrive, so which request gets which is chance. Replies cut short (`malformed_json`, 0.005)
    once spent the answer-failure budget of 3, and one of the 3,510 requests drawing three
    in a row left the run incomplete (exit 4) in about 5e-4 of runs, so this copy raised the
    budget. Such a reply is no answer of the model's and spends no budget now
    (`engine.records.FOREIGN_NOTE`): a request fails the run only after `max_attempts` (8)
    failures of any kind (2.5% each), about 5e-10 of runs."""
    path = folder / "quickstart.toml"
    path.write_text(QUICKSTART.read_text("utf-8"), "utf-8")
    return path


def run_spec(root: Path, spec_text: str) -> tuple[Path, int, str]:
    """`dutchbook run` of `spec_text` into `root/out`: the folder, the exit code and the
    output (a run that gave requests up ends unfinished, and still scores and reports)."""
    spec = root / "spec.toml"
    spec.write_text(spec_text, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(root / "out")])
    return root / "out", result.exit_code, result.output


def finish_run(root: Path, spec_text: str) -> Path:
    """`dutchbook run` of `spec_text` into `root/out`, which it returns (the run must end 0)."""
    out, code, output = run_spec(root, spec_text)
    assert code == 0, output
    return out


#: The one file of a finished folder that names the folder: the engine's log says which plan
#: its dispatch read (`dispatch_started`), a line nothing reads back.
NAMES_ITS_FOLDER = Path("logs") / "engine.jsonl"


class FinishedRuns:
    """Finished runs of spec texts, each run once per test session and copied to each test
    that asks: a small campaign costs seconds of CPU, a copy milliseconds.

    The cache under `root` is shared by every xdist worker (a lock per spec text: a worker
    asking for a run another is making waits for it). A copy behaves as the folder it copies
    at its own place: every command's output and every file after status, audit, score,
    report, reparse and resumes were the same with the paths swapped, once the one line
    naming the folder (`NAMES_ITS_FOLDER`) is rewritten, as the copy does; a fill refuses a
    folder where any other file names it. Only for tests of what is done to a finished
    folder: the run is made under the first asking test's patches, so a test that patches
    the run, or tests the run itself (its output, timing, signals), runs its own."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run(self, root: Path, spec_text: str) -> tuple[Path, int]:
        """What `run_spec(root, spec_text)` leaves, `root/spec.toml` and `root/out`: the folder
        and the run's exit code (its output is not kept)."""
        made, code = self._made(spec_text)
        root.mkdir(parents=True, exist_ok=True)
        (root / "spec.toml").write_text(spec_text, encoding="utf-8")
        shutil.copytree(made, root / "out")
        log = root / "out" / NAMES_ITS_FOLDER
        log.write_bytes(log.read_bytes().replace(str(made).encode(), str(root / "out").encode()))
        return root / "out", code

    def finish(self, root: Path, spec_text: str) -> Path:
        """What `finish_run(root, spec_text)` leaves: `root/out`, of a run that ended 0."""
        out, code = self.run(root, spec_text)
        assert code == 0, f"the run of this spec ended {code}:\n{spec_text}"
        return out

    def copy_to(self, out: Path, spec_text: str) -> int:
        """A copy of the finished run of `spec_text` at `out`, wherever the test keeps its
        folder (`run` puts it at `root/out`): the run's exit code. No spec is written."""
        made, code = self._made(spec_text)
        shutil.copytree(made, out)
        log = out / NAMES_ITS_FOLDER
        log.write_bytes(log.read_bytes().replace(str(made).encode(), str(out).encode()))
        return code

    def made(self, name: str, make: Callable[[Path], object]) -> Path:
        """`root/name`, filled by `make(folder)` once a session for every worker (a lock per
        name, as per spec text): for a campaign `run` does not make as the tests need it (run
        in the test's process, its console kept, its renders counted), and the inputs its spec
        names. `name` stands for what `make` does: the first asking worker's folder is every
        worker's. Tests copy what they change; what `make` leaves is read, never changed."""
        folder = self.root / name
        with (self.root / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
            done = self.root / f"{name}.made"
            if not done.is_file():  # never made, or `make` raised part-way
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                make(folder)
                done.touch()
        return folder

    def _made(self, spec_text: str) -> tuple[Path, int]:
        """The cached folder of `spec_text` and its run's exit code, run here if no worker has."""
        key = self.root / hashlib.sha256(spec_text.encode()).hexdigest()[:16]
        with (self.root / f"{key.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
            code_file = key / "exit-code"
            if not code_file.is_file():  # never made, or its run raised part-way
                shutil.rmtree(key, ignore_errors=True)
                key.mkdir()
                out, code, _ = run_spec(key, spec_text)
                _names_itself_once(out)
                code_file.write_text(str(code), encoding="utf-8")
            return key / "out", int(code_file.read_text(encoding="utf-8"))


def _names_itself_once(folder: Path) -> None:
    """Refuse to cache a folder that names itself anywhere a copy would not rewrite."""
    named = str(folder).encode()
    naming = [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder) != NAMES_ITS_FOLDER and named in p.read_bytes()
    ]
    assert not naming, f"{naming} name the folder: a copy elsewhere would name this one"


def folder_contents(folder: Path, skip: frozenset[str] = frozenset()) -> dict[str, bytes]:
    """Every file's bytes below `folder` by relative path, files named in `skip` left out."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def unprivileged(args: list[str]) -> list[str]:
    """`args` run so that file permissions hold: as they are for a user, and for root
    without the capabilities that override them (`setpriv`), skipped where it cannot be."""
    if os.geteuid() != 0:
        return args
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root reads every file, and setpriv is not here to drop that")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", *args]
