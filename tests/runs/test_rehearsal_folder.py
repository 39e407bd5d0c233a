"""A rehearsal marks its run folder (`runs.rehearsal`): its answers are said to be the
simulator's, and no run mixes them with a provider's.

A tester's real `make demo-local` resumed the folder of a `--rehearse` of the same spec
(`out/local` both), asked nothing ("58 already accepted") and reported the simulator's
figures as Gemma's; a rehearsal into a real run's folder added 37 simulated answers to 21
real ones, exit 0; and a rehearsal's page called its answers "a real model's real answers".
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.rehearsal import AUDIT_REHEARSAL_NOTE, REHEARSAL_FILE, REHEARSAL_NOTE
from runs.report.models import REHEARSAL_WORDS

#: The local model's spec: an OpenAI-compatible server on this machine, which no test starts.
LOCAL = Path(__file__).resolve().parents[2] / "runs" / "specs" / "local.toml"


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rehearsal") / "local"
    done = CliRunner().invoke(app, ["run", str(LOCAL), "--rehearse", "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out


def _attempt_files(run_dir: Path) -> list[str]:
    return sorted(
        str(p.relative_to(run_dir)) for kind in ("attempts", "journal")
        for p in (run_dir / kind).iterdir()
    )  # fmt: skip


def test_a_rehearsals_report_says_every_answer_is_the_simulators(rehearsal: Path) -> None:
    assert (rehearsal / REHEARSAL_FILE).is_file()
    page = (rehearsal / "report" / "index.html").read_text(encoding="utf-8")
    assert "Simulated forecasters:</strong> gemma3-270m-base answered from the local " in page
    assert REHEARSAL_WORDS.replace("'", "&#x27;") in page
    # The spec's `about` ("a real model's real answers"), which is not said of these answers.
    assert "real answers" not in page
    markdown = (rehearsal / "report" / "report.md").read_text(encoding="utf-8")
    assert f"no provider was called{REHEARSAL_WORDS}." in markdown
    assert "real answers" not in markdown
    # Files scripts read without the page say it too.
    summary = orjson.loads((rehearsal / "report" / "summary.json").read_bytes())
    assert summary["provenance"]["rehearsal"] is True
    leaderboard = (rehearsal / "report" / "leaderboard.txt").read_text(encoding="utf-8")
    assert leaderboard.startswith(f"{REHEARSAL_NOTE}\n\n")
    status = CliRunner().invoke(app, ["status", str(rehearsal), "--json"])
    said = orjson.loads(status.stdout)
    assert said["rehearsal"] is True and said["notes"][0] == REHEARSAL_NOTE


def test_a_rehearsals_audit_says_its_latencies_and_tokens_are_the_simulators(
    rehearsal: Path, tmp_path: Path
) -> None:
    """The audit's tables name the providers, their latencies and tokens read as theirs (a
    new user's), though `status` and the report said the simulator answered."""
    shown = CliRunner().invoke(app, ["audit", str(rehearsal)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[1] == AUDIT_REHEARSAL_NOTE
    assert AUDIT_REHEARSAL_NOTE.startswith(REHEARSAL_NOTE.removesuffix("."))
    said = orjson.loads(CliRunner().invoke(app, ["audit", str(rehearsal), "--json"]).stdout)
    assert said["rehearsal"] is True and said["notes"] == [AUDIT_REHEARSAL_NOTE]
    (rehearsal / REHEARSAL_FILE).rename(tmp_path / REHEARSAL_FILE)  # a run's folder
    try:
        plain = CliRunner().invoke(app, ["audit", str(rehearsal), "--json"]).stdout
        assert orjson.loads(plain)["notes"] == []
    finally:
        (tmp_path / REHEARSAL_FILE).rename(rehearsal / REHEARSAL_FILE)


def test_a_run_is_refused_a_rehearsals_folder_before_anything_is_asked(
    rehearsal: Path, tmp_path: Path
) -> None:
    before = _attempt_files(rehearsal)
    refused = CliRunner().invoke(app, ["run", str(LOCAL), "--out", str(rehearsal)])
    assert refused.exit_code == 2, refused.output
    assert refused.output.replace("\n", "") == (
        f"error: {rehearsal} holds a rehearsal's answers (the local simulator's, --rehearse): "
        "a run there would take them for the models' own; give --out another folder, or "
        "resume the rehearsal with --rehearse"
    )
    assert _attempt_files(rehearsal) == before and (rehearsal / REHEARSAL_FILE).is_file()


def test_a_rehearsal_is_refused_a_folder_with_a_providers_answers(
    rehearsal: Path, tmp_path: Path
) -> None:
    """A folder whose attempts came from the providers, as a rehearsal's folder reads with
    its mark taken away."""
    import shutil

    real = tmp_path / "real"
    shutil.copytree(rehearsal, real)
    (real / REHEARSAL_FILE).unlink()
    refused = CliRunner().invoke(app, ["run", str(LOCAL), "--rehearse", "--out", str(real)])
    assert refused.exit_code == 2, refused.output
    assert refused.output.replace("\n", "") == (
        f"error: {real} holds answers from the models' providers: a rehearsal there would mix "
        "the local simulator's in with them; rehearse into another folder (--out)"
    )
    assert not (real / REHEARSAL_FILE).exists()


def test_a_rehearsal_resumes_its_own_folder(rehearsal: Path) -> None:
    again = CliRunner().invoke(app, ["run", str(LOCAL), "--rehearse", "--out", str(rehearsal)])
    assert again.exit_code == 0, again.output
    assert "0 attempts" in again.output and (rehearsal / REHEARSAL_FILE).is_file()


def test_batch_jobs_at_the_provider_count_as_asked(rehearsal: Path, tmp_path: Path) -> None:
    """A batch job's lines reach the ledger only once collected: a folder whose only trace
    of asking is `batches/jobs.jsonl` let a rehearsal in, which then polled the simulator for
    the provider's jobs."""
    import shutil

    from engine.batch_jobs import JOBS_FILE
    from providers.types import ModelConfig
    from runs.rehearsal import mixing_refusal

    groq = [ModelConfig(name="g", provider="groq", model="llama-3.1-8b-instant")]
    real = tmp_path / "real"
    shutil.copytree(rehearsal, real)
    for kind in ("attempts", "journal", "responses"):
        shutil.rmtree(real / kind)
    (real / REHEARSAL_FILE).unlink()
    assert mixing_refusal(real, groq, rehearse=True) is None  # nothing asked yet
    (real / JOBS_FILE).parent.mkdir(exist_ok=True)
    (real / JOBS_FILE).write_text('{"event": "planned", "job_key": "k1"}\n', encoding="utf-8")
    refusal = mixing_refusal(real, groq, rehearse=True)
    assert refusal is not None and "holds answers from the models' providers" in refusal
