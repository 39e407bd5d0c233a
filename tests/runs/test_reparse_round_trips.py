"""What `status`, `run`, `audit` and `report` say of a folder that `dutchbook reparse` took to
strict and back, or left unfinished.

Found by a review of reparse round trips: after `reparse --parser strict` of a lenient run,
`status` counted the answers strict rejected as pending failures and said nothing of the
reparse that takes them back, though a resume of the lenient spec is refused until it runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import app

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


def _invoke(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return done.exit_code, done.output


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("round-trip")
    (root / "spec.toml").write_text(SPEC, encoding="utf-8")
    code, said = _invoke("run", str(root / "spec.toml"), "--out", str(root / "run"))
    assert code == 0, said
    return root


@pytest.fixture
def root(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished lenient run (`run/`), its spec beside it."""
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_status_after_a_strict_reparse_names_the_reparse_that_takes_them_back(
    root: Path,
) -> None:
    out = root / "run"
    code, said = _invoke("reparse", str(out), "--parser", "strict")
    assert code == 0 and "accepted 56 → 28" in said, said
    line = (
        "28 requests have no answer only because `dutchbook reparse --parser strict` rejected "
        f"the replies the run had accepted: `dutchbook reparse {out} --parser lenient` takes "
        "them back without a call (a resume with a lenient spec is refused until then)"
    )
    code, said = _invoke("status", str(out))
    assert code == 0 and line in said.splitlines(), said
    code, said = _invoke("status", str(out), "--json")
    summary = json.loads(said)
    assert summary["answers_rejected_on_reparse"] == 28
    assert summary["notes"] == [line]
    assert summary["pending_failures"]["total"] == 28  # as before: still pending
    assert summary["warnings"] == []

    code, said = _invoke("run", str(root / "spec.toml"), "--out", str(out))
    assert code == 2 and f"`dutchbook reparse {out} --parser lenient`" in said, said
    assert _invoke("reparse", str(out), "--parser", "lenient")[0] == 0  # as the line says
    code, said = _invoke("status", str(out), "--json")
    summary = json.loads(said)
    assert summary["answers_rejected_on_reparse"] == 0 and summary["notes"] == []
    assert summary["accepted"] == 56
    assert _invoke("run", str(root / "spec.toml"), "--out", str(out))[0] == 0
