"""A resume refuses, before it plans or sends anything, a path it writes once dispatch has
begun that stands in the way, or a folder of the run it may not write in.

Before, a read-only `logs/` ended a resume after dispatch (its answers paid for) in "error:
Permission denied: .../logs/.lanes.json.tmp", exit 2, with no scores and no report; so did a
file named `report`, a folder named `scores.parquet` or `logs/phases.jsonl`. A read-only
`responses/` or `attempts/` stopped it after planning in polars' words, with no advice.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.runs.run_folders import SMALL_SPEC, FinishedRuns, folder_contents, unprivileged

_MOVE = "move or remove it, then run the same command again"


def _read_only(path: Path) -> None:
    path.mkdir(exist_ok=True)  # a finished run has no `batches/`
    path.chmod(0o555)


def _a_file(path: Path) -> None:
    _remove(path)
    path.write_text("not the run's\n", encoding="utf-8")


def _a_folder(path: Path) -> None:
    _remove(path)
    path.mkdir(parents=True)  # `batches/jobs.jsonl`: a finished run has no `batches/`


def _remove(path: Path) -> None:
    if path.is_dir():
        for inner in sorted(path.rglob("*"), reverse=True):
            inner.rmdir() if inner.is_dir() else inner.unlink()
        path.rmdir()
    else:
        path.unlink(missing_ok=True)


def _cannot_write(path: Path, out: Path) -> str:
    return (
        f"cannot write in {path} (Permission denied), a folder of the run {out}; give it the "
        "access it lacks, then run the same command again"
    )


def _file_in_the_way(path: Path, out: Path) -> str:
    return f"{path} is a file where a folder goes: {_MOVE}"


def _folder_in_the_way(path: Path, out: Path) -> str:
    return f"{path} is a folder where a file goes: {_MOVE}"


Damage = tuple[Callable[[Path], None], Callable[[Path, Path], str]]
READ_ONLY: Damage = (_read_only, _cannot_write)
A_FILE: Damage = (_a_file, _file_in_the_way)
A_FOLDER: Damage = (_a_folder, _folder_in_the_way)
#: The folders a run writes in once dispatch has begun, and the files it writes then.
FOLDERS = ["logs", "journal", "attempts", "responses", "batches", "report"]
FILES = [
    "logs/lanes.json", "logs/engine.jsonl", "logs/phases.jsonl", "logs/pauses.jsonl",
    "batches/jobs.jsonl", "forecasts.parquet", "scores.parquet", "averaged.parquet",
    "scored-from.json",
]  # fmt: skip
CASES = [
    *((folder, READ_ONLY) for folder in FOLDERS),
    *((folder, A_FILE) for folder in FOLDERS),
    *((file, A_FOLDER) for file in FILES),
]


@pytest.mark.parametrize(("name", "damage"), CASES, ids=[
    f"{name}-{damage[0].__name__.strip('_')}" for name, damage in CASES
])  # fmt: skip
def test_a_resume_refuses_what_it_would_find_in_its_way_only_after_dispatch(
    finished_runs: FinishedRuns, tmp_path: Path, name: str, damage: Damage
) -> None:
    out = finished_runs.finish(tmp_path, SMALL_SPEC)
    path = out / name
    make, said = damage
    make(path)
    before = folder_contents(out)
    try:
        done = subprocess.run(
            unprivileged([sys.executable, "-m", "runs.cli", "run", str(tmp_path / "spec.toml"),
                          "--out", str(out)]),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        if path.is_dir():
            path.chmod(0o755)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output and "planned" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {said(path, out)}"], output
    assert folder_contents(out) == before  # nothing planned, sent or written; no probe left
