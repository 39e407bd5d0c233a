"""Answers whose accepted attempt is not in `attempts/` (a lost attempts file) are said, and
the audit no longer reads them as a perfect run.

Found by a hostile tester: with `attempts/part-*.parquet` deleted from a finished run,
`status` showed "accepted 534/534, 0 attempts", and status, audit and report.md said "No
retry attempts: every attempt was accepted (534 requests)", exit 0, no warning, where the
real audit had 20 retries. A resume is not refused: the requests are answered, so it asks
(and pays for) none of them again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.scan import scan_attempts
from runs.audit import run_audit
from tests.runs.quiet_campaign import invoke, retried_spec, run_quietly

SPEC = retried_spec("no-attempts", 8)

WARNING = (
    "28 accepted answers have no attempt in attempts/ (a lost or damaged file): the retry "
    "counts leave out whatever came before them; no command writes attempts/ again (restore "
    "it from a copy to count them)"
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("no-attempts")
    run_quietly(root, "no-attempts", SPEC)
    return root


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run, its attempts file deleted; the spec beside it."""
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    for shard in (tmp_path / "run" / "attempts").glob("*.parquet"):
        shard.unlink()
    return tmp_path / "run"


def test_status_audit_and_report_say_the_attempts_are_missing(
    finished: Path, run_dir: Path
) -> None:
    assert run_audit(finished / "run").totals.retry_attempts > 0  # the real run retried
    found = run_audit(run_dir)
    assert found.totals.answers_unrecorded == 28
    assert "every attempt was accepted" not in found.sentence
    assert found.sentence == (
        "No retry attempts recorded, but 28 of 28 accepted answers have no recorded attempt, "
        "so the retries cannot be counted."
    )
    for command in ("status", "audit"):
        code, said = invoke(command, str(run_dir))
        assert code == 0 and WARNING in said, said
        assert "every attempt was accepted" not in said, said
    summary = json.loads(invoke("status", str(run_dir), "--json")[1])
    assert summary["answers_unrecorded"] == 28 and WARNING in summary["warnings"]
    assert invoke("report", str(run_dir))[0] == 0
    text = (run_dir / "report" / "report.md").read_text("utf-8")
    assert WARNING in text and "every attempt was accepted" not in text


def test_a_resume_asks_nothing_again(run_dir: Path) -> None:
    code, said = invoke("run", str(run_dir.parent / "no-attempts.toml"), "--out", str(run_dir))
    assert code == 0, said
    assert scan_attempts(run_dir).collect().height == 0  # answered: nothing asked or paid
