"""A finished small campaign to copy, and a folder's files to compare, for the tests of the
commands that rewrite a run folder (`score`, `repair`, `reparse`, `report`)."""

from __future__ import annotations

from pathlib import Path

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


def folder_contents(folder: Path, skip: frozenset[str] = frozenset()) -> dict[str, bytes]:
    """Every file's bytes below `folder` by relative path, files named in `skip` left out."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in skip
    }
