"""Accepted answers missing from `responses/` while their attempts (replies included) are in
the ledger: `run` refuses to pay for them again and `audit`/`status` say what is true.

Found by a hostile tester: with `responses/part-*.parquet` deleted from a finished run (no
reparse ever ran), `audit` called the 534 accepted replies "invalid responses" with the
subcause `rejected_on_reparse`, and `dutchbook run` of the same spec sent (and paid for) all
534 queries again, exit 0, leaving 1,068 `ok` attempts and "duplicate answers (534)". Every
reply was still in `attempts/`: `dutchbook reparse DIR --parser P` rebuilds them, no call.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from engine.audit import audit
from engine.scan import lost_answers, scan_attempts
from tests.runs.quiet_campaign import invoke, retried_spec, run_quietly

SPEC = retried_spec("lost", 4)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lost")
    run_quietly(root, "lost", SPEC)
    return root


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run, its answers file deleted; the spec beside it."""
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    for shard in (tmp_path / "run" / "responses").glob("*.parquet"):
        shard.unlink()
    return tmp_path / "run"


def _ok_attempts(run_dir: Path) -> int:
    return scan_attempts(run_dir).filter(pl.col("outcome") == "ok").collect().height


def test_the_audit_calls_them_missing_not_rejected_on_reparse(
    finished: Path, run_dir: Path
) -> None:
    assert not (run_dir / "logs" / "reparses.jsonl").exists()  # no reparse ever ran
    before = audit(finished / "run")
    assert before.totals.retry_attempts > 0  # the faults were drawn
    after = audit(run_dir, spec_parser="lenient")
    # The retries are those of the run, not the answers it lost.
    assert after.sentence == before.sentence
    assert after.totals.invalid_response_subcauses["rejected_on_reparse"] == 0
    assert after.totals.answers_missing == 28 and after.totals.given_up_total == 0
    code, said = invoke("audit", str(run_dir))
    assert code == 0 and "rejected_on_reparse" not in said, said
    assert (
        f"28 accepted answers are missing from responses/ (their replies are kept in the "
        f"ledger): `dutchbook reparse {run_dir} --parser lenient` rebuilds them without a call"
    ) in said, said
    code, said = invoke("status", str(run_dir), "--json")
    summary = json.loads(said)
    assert summary["answers_missing"] == 28 and summary["pending_failures"]["total"] == 0
    assert summary["retries"] == before.totals.retry_attempts
    code, said = invoke("status", str(run_dir))
    assert code == 0 and f"dutchbook reparse {run_dir} --parser lenient" in said, said


def test_a_resume_refuses_to_pay_again_and_reparse_rebuilds_them(run_dir: Path) -> None:
    assert lost_answers(run_dir) == 28
    ok_before = _ok_attempts(run_dir)
    spec = run_dir.parent / "lost.toml"
    code, said = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 2, said
    assert said == (
        f"error: {run_dir}: 28 accepted answers are missing from responses/ (their replies are "
        "kept in the ledger); resuming would ask and pay for them again: run `dutchbook "
        f"reparse {run_dir} --parser lenient` first, which rebuilds them without a call, "
        "then run again\n"
    )
    assert _ok_attempts(run_dir) == ok_before  # nothing was sent
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0 and "accepted 0 → 28" in said, said
    assert lost_answers(run_dir) == 0
    code, said = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 0, said
    assert _ok_attempts(run_dir) == ok_before  # nothing asked again, nothing accepted twice
