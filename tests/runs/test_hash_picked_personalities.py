"""A simulated model whose id names no personality, the spec giving none, answers as one its
id's hash picks (`providers.sim.forecasters.personality_for`): a documented feature, but
`model = "sim-coherant"` in the quickstart (a typo) ran as another personality, its profit
0.04477 where the coherent one's is about nought, while `plan` and `run` said nothing, and
every other typo in a spec is refused with "did you mean". They say it now, in a line per
model (`runs.spec.hash_picked_personalities`), and still run it."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from providers.sim.forecasters import personality_for
from runs.cli import app
from runs.output import warn
from runs.spec import hash_picked_personalities, load_spec

SPEC = """
name = "typos"
seed = 2
[data]
stock_days = 2
[[models]]
name = "typo"
provider = "sim"
model = "sim-coherant"
[[models]]
name = "named"
provider = "sim"
model = "sim-noisy"
[[models]]
name = "given"
provider = "sim"
model = "house-model"
personality = "anchored"
[[models]]
name = "far"
provider = "sim"
model = "house-model"
[[arms]]
name = "baseline"
"""


ROOT = Path(__file__).resolve().parents[2]
DUTCHBOOK = [sys.executable, "-m", "runs.entry"]


def _spec(root: Path) -> Path:
    path = root / "spec.toml"
    path.write_text(SPEC, encoding="utf-8")
    return path


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if "picked by the id's hash" in line]


def test_each_model_answering_by_its_ids_hash_is_said_with_the_id_it_likely_meant(
    tmp_path: Path,
) -> None:
    lines = hash_picked_personalities(load_spec(_spec(tmp_path)))
    assert lines == [
        f"typo: model 'sim-coherant' names no simulated personality and the spec gives none, "
        f"so it answers as {personality_for('sim-coherant')} (picked by the id's hash); did "
        "you mean sim-coherent?",
        f"far: model 'house-model' names no simulated personality and the spec gives none, "
        f"so it answers as {personality_for('house-model')} (picked by the id's hash); set "
        "`personality` to choose one",
    ]


def test_plan_warns_on_stderr_and_its_json_stays_one_object(tmp_path: Path) -> None:
    spec = str(_spec(tmp_path))
    planned = CliRunner().invoke(app, ["plan", spec], env={"COLUMNS": "200"})
    assert planned.exit_code == 0, planned.output
    said = _warnings(planned.stderr)
    assert len(said) == 2 and said[0].startswith("warning: typo: ")
    assert "did you mean sim-coherent?" in said[0]
    as_json = CliRunner().invoke(app, ["plan", spec, "--json"])
    assert as_json.exit_code == 0 and len(_warnings(as_json.stderr)) == 2
    assert set(json.loads(as_json.stdout)["by_model"]) == {"typo", "named", "given", "far"}


def test_run_warns_on_stderr_and_runs(tmp_path: Path) -> None:
    """`run` said them on stdout, where `plan` says them on stderr, as warnings go."""
    done = CliRunner().invoke(
        app, ["run", str(_spec(tmp_path)), "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    said = _warnings(done.stderr)
    assert len(said) == 2 and said[0].startswith("warning: typo: ")
    assert "did you mean sim-coherent?" in said[0]
    assert not _warnings(done.stdout)
    # Said before the plan, so before anything is asked (`output` has both, in order).
    assert done.output.index(said[-1]) < done.output.index("planned")


def test_an_id_naming_its_personality_inside_a_word_or_twice_is_said(tmp_path: Path) -> None:
    """`sim-incoherent` answered as coherent, and `sim-noisy-coherent` as coherent too (the
    first of the personalities found in the id), without a word (a tester's). Ids that name
    one personality on their own (`sim-noisy`, `SIM_NOISY`, `sim-noisy2`) say nothing."""
    models = ["sim-incoherent", "sim-noisy-coherent", "sim-noisy", "SIM_NOISY", "sim-noisy2"]
    spec = "\n".join(
        ['name = "doubts"', "seed = 2", "[data]", "stock_days = 2"]
        + [f'[[models]]\nname = "m{i}"\nprovider = "sim"\nmodel = "{m}"' for i, m in
           enumerate(models)]
        + ["[[arms]]", 'name = "baseline"']
    )  # fmt: skip
    path = tmp_path / "spec.toml"
    path.write_text(spec, encoding="utf-8")
    assert hash_picked_personalities(load_spec(path)) == [
        "m0: model 'sim-incoherent' answers as coherent: its id names coherent inside the word "
        "'incoherent'; name one personality on its own (sim-noisy) to choose another",
        "m1: model 'sim-noisy-coherent' answers as coherent: its id names 2 personalities "
        "(coherent, noisy); coherent is taken (first of coherent, noisy, anchored, framing, "
        "fraction); name one personality on its own (sim-noisy) to choose another",
    ]



def test_a_warning_that_cannot_be_written_is_dropped_and_the_command_goes_on(
    tmp_path: Path,
) -> None:
    """With stderr on a full device the warnings ended `run` and `plan` in exit 6 before
    anything was planned; with stderr closed (`2>&-`) `run` printed them on stdout."""
    spec = str(_spec(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open("/dev/full", "w") as full:
        planned = subprocess.run([*DUTCHBOOK, "plan", spec, "--json"], env=env,
                                 stdout=subprocess.PIPE, stderr=full, text=True)  # fmt: skip
        assert planned.returncode == 0 and isinstance(json.loads(planned.stdout), dict)
        run = subprocess.run([*DUTCHBOOK, "run", spec, "--out", str(tmp_path / "a")], env=env,
                             stdout=subprocess.PIPE, stderr=full, text=True)  # fmt: skip
        assert run.returncode == 0 and run.stdout.endswith(f"run folder: {tmp_path / 'a'}\n")
    closed = subprocess.run(
        [*DUTCHBOOK, "run", spec, "--out", str(tmp_path / "b")], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        preexec_fn=lambda: os.close(2),
    )  # fmt: skip
    assert closed.returncode == 0 and not _warnings(closed.stdout), closed.stdout


def test_warn_writes_one_line_on_stderr_or_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    warn("a line")
    assert capsys.readouterr().err == "warning: a line\n"

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    for stream in (Full(), None):
        monkeypatch.setattr(sys, "stderr", stream)
        warn("dropped")  # nothing raised, nothing said
