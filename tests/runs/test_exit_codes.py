"""A run that ends with questions unanswered says so and exits 4; the other lanes finish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from providers.sim.server import start_sim

WRONG_KEY = "gsk_wrong_key_for_exit_code_test_0001"
SPEC = """
name = "badkey"
seed = 1
[data]
stock_days = 2
[[models]]
name = "groq-wrong-key"
provider = "groq"
model = "openai/gpt-oss-120b"
base_url = "{root}/groq/openai/v1"
[[models]]
name = "sim-ok"
provider = "sim"
model = "sim-coherent"
[[arms]]
name = "baseline"
"""


@pytest.mark.figures  # the folder scanned for the key holds the figures too
async def test_a_stopped_lane_leaves_the_run_incomplete_exit_4(tmp_path: Path) -> None:
    async with await start_sim(port=0) as sim:
        spec = tmp_path / "badkey.toml"
        spec.write_text(SPEC.format(root=sim.root_url), encoding="utf-8")
        out = tmp_path / "run"
        env = {**os.environ, "GROQ_API_KEY": WRONG_KEY}
        result = subprocess.run(
            [str(Path(sys.executable).with_name("dutchbook")), "run", str(spec), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "incomplete: 28 planned queries unanswered" in result.stderr
    assert "stopped after 3 auth_error failures in a row" in result.stdout + result.stderr
    responses = pl.scan_parquet(out / "responses" / "*.parquet").collect()
    assert set(responses["model"]) == {"sim-ok"} and responses.height == 28
    scores = pl.read_parquet(out / "scores.parquet")
    assert scores.filter(pl.col("model") == "groq-wrong-key")["coverage"].max() == 0.0
    # The report a referee reads says which lane stopped, why, and what it left unasked.
    stopped = (
        "groq-wrong-key (groq): 28 of 28 requests unanswered; its lane stopped after 3 "
        "auth_error failures in a row (HTTP 401)"
    )
    report = (out / "report" / "report.md").read_text(encoding="utf-8")
    assert f"- {stopped}" in report and "sim-ok (sim):" not in report
    assert "- Running the same command again asks only the unanswered requests." in report
    assert f"<li>{stopped}" in (out / "report" / "index.html").read_text(encoding="utf-8")
    for path in [p for p in out.rglob("*") if p.is_file()]:
        # Parquet pages are compressed: decode them rather than trust a byte scan.
        text = str(pl.read_parquet(path).to_dicts()) if path.suffix == ".parquet" else ""
        assert WRONG_KEY.encode() not in path.read_bytes() and WRONG_KEY not in text, path
    assert WRONG_KEY not in result.stdout + result.stderr


def test_an_answer_budget_spent_is_named_with_what_asks_again(tmp_path: Path) -> None:
    """Requests given up for their answer-failure budget are not asked by a plain resume:
    the closing line says so and names the setting that does (it said only "run the same
    command again", which then changed nothing, run after run)."""
    from typer.testing import CliRunner

    from runs.cli import app

    spec = tmp_path / "strict.toml"
    spec.write_text(
        'name = "strict"\nseed = 1\nparser = "strict"\n[data]\nstock_days = 2\n'
        '[[models]]\nname = "fractions"\nprovider = "sim"\nmodel = "sim-fraction"\n'
        '[[arms]]\nname = "baseline"\n',
        encoding="utf-8",
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert result.exit_code == 4, result.output
    said = result.output  # stdout and stderr together
    assert "28 gave up with their answer-failure budget spent" in said
    assert "max attempts" not in said
    assert (
        "incomplete: 28 planned queries unanswered (see above); fix the cause and run the same "
        "command again to resume (28 of them spent their answer-failure budget: a resume asks "
        "them again only once max_answer_failures is raised in the spec; first try "
        f"`dutchbook reparse {out} --parser lenient`, which reads their kept replies again "
        "without a call)"
    ) in said.replace("\n", "")
    # The audit and the report a referee reads say it too (they said only "given up").
    note = (
        "fractions: 28 requests given up with the answer-failure budget spent; running the "
        "same command again asks them only once the spec's max_answer_failures is raised."
    )
    audited = CliRunner().invoke(app, ["audit", str(out)])
    assert note in audited.output.replace("\n", " ")
    assert f"- {note}" in (out / "report" / "report.md").read_text(encoding="utf-8")
    as_json = CliRunner().invoke(app, ["audit", str(out), "--json"])
    assert '"answer_budget_spent": 28' in as_json.output
    # So does `status`, which said "(0 permanent)" alone (a tester: read as all to be asked).
    watched = CliRunner().invoke(app, ["status", str(out), "--json"])
    assert json.loads(watched.output)["pending_failures"]["answer_budget_spent"] == 28
    shown = CliRunner().invoke(app, ["status", str(out)]).output.replace("\n", " ")
    assert (
        "28 requests failed and are not yet answered (0 permanent; 28 with the answer-failure "
        "budget spent, asked again only once the spec's max_answer_failures is raised)"
    ) in " ".join(shown.split())
    # The advice holds: the lenient parser reads every kept fraction, without a call.
    reparsed = CliRunner().invoke(app, ["reparse", str(out), "--parser", "lenient", "--json"])
    assert reparsed.exit_code == 0, reparsed.output
    assert json.loads(reparsed.stdout)["newly_accepted"] == 28


def spent_requests(run_dir: Path, replies: list[str | None]) -> Path:
    """A ledger of one request per reply in `replies`, each given up with its answer-failure
    budget spent on three `invalid_response` attempts, the last keeping that reply (None:
    one not kept, such as a reply over the size limit)."""
    from datetime import UTC, datetime

    from engine.ledger import Ledger
    from engine.records import AttemptRecord
    from engine.retry import gave_up_detail

    with Ledger.open(run_dir) as ledger:
        for i, reply in enumerate(replies):
            for n in (1, 2, 3):
                detail = "not_json: no JSON object"
                if n == 3:
                    detail = gave_up_detail(detail, "3 answer failures (budget 3, across runs)")
                ledger.record_result(
                    AttemptRecord(
                        f"r{i}", n, "m", "sim", datetime(2026, 3, 2, tzinfo=UTC), 5.0,
                        "invalid_response", 200, None, None, 50, 5, detail,
                        raw_text=reply if n == 3 else None,
                    ),
                    None,
                )  # fmt: skip
    return run_dir


def test_the_reparse_advice_is_given_only_where_a_lenient_parser_could_help(
    tmp_path: Path,
) -> None:
    """Only where replies were kept: one over the size limit, a body that was not JSON or a
    refusal is not, and the closing line offered the reparse for them too."""
    from types import SimpleNamespace

    from runs.commands.run import _incomplete_line
    from runs.pipeline import CampaignResult

    def line(parser: str, spent: int, run_dir: Path) -> str:
        summary = SimpleNamespace(unaccepted=30, answer_budget_spent=spent, held_by_jobs={},
                                  lost_to_damage=0)
        return _incomplete_line(CampaignResult(run_dir, summary, {}, parser=parser))

    kept = spent_requests(tmp_path / "kept", ["11/36", "1/2", "0,4"])
    assert (
        f"; first try `dutchbook reparse {kept} --parser lenient`, which reads their kept "
        "replies again without a call)"
    ) in line("strict", 3, kept)
    said = line("lenient", 3, kept)
    assert "max_answer_failures" in said and "reparse" not in said
    assert line("strict", 0, kept) == (
        "incomplete: 30 planned queries unanswered (see above); fix the cause and run the same "
        "command again to resume"
    )
    # Replies not kept (None) or blank are nothing a reparse could read.
    unread = spent_requests(tmp_path / "unread", [None, None, "  "])
    said = line("strict", 3, unread)
    assert "max_answer_failures is raised in the spec)" in said and "reparse" not in said
    some = spent_requests(tmp_path / "some", [None, "11/36", None])
    assert line("strict", 3, some).endswith(
        f"; first try `dutchbook reparse {some} --parser lenient`, which reads the replies "
        "kept for 1 of them again without a call)"
    )


def test_one_unanswered_query_is_said_in_the_singular() -> None:
    """A hostile tester's run ended 'incomplete: 1 planned queries unanswered'."""
    from types import SimpleNamespace

    from runs.commands.run import _incomplete_line
    from runs.pipeline import CampaignResult

    summary = SimpleNamespace(unaccepted=1, answer_budget_spent=0, held_by_jobs={},
                              lost_to_damage=0)
    said = _incomplete_line(CampaignResult(Path("out/x"), summary, {}, parser="strict"))
    assert said.startswith("incomplete: 1 planned query unanswered (see above);")
    # Requests a batch job of an earlier run holds are never asked by a live model: the
    # line sent its user round for ever ("run the same command again").
    held = SimpleNamespace(unaccepted=28, answer_budget_spent=0, held_by_jobs={"m": 28},
                           lost_to_damage=0)
    said = _incomplete_line(CampaignResult(Path("out/x"), held, {}, parser="strict"))
    assert said.endswith(
        "(28 of them held by batch jobs of an earlier run, which a live model does not ask: "
        'set dispatch = "batch" again for m to collect them)'
    )


def test_requests_lost_twice_to_damaged_batch_results_are_said_given_up_for_good() -> None:
    """No resume asks them (each loss was billed): "run the same command again" alone sent
    its user round for ever."""
    from types import SimpleNamespace

    from runs.commands.run import _incomplete_line
    from runs.pipeline import CampaignResult

    lost = SimpleNamespace(unaccepted=5, answer_budget_spent=0, held_by_jobs={},
                           lost_to_damage=2)
    said = _incomplete_line(CampaignResult(Path("out/x"), lost, {}, parser="strict"))
    assert "run the same command again to resume" in said  # the other 3
    assert said.endswith(
        "(2 of them given up for good: damaged batch results lost their lines twice, each "
        "loss billed, and no run asks them again)"
    )
    # All of them lost: no line sends its user to a resume that asks nothing (a reviewer's).
    lost.unaccepted = 2
    said = _incomplete_line(CampaignResult(Path("out/x"), lost, {}, parser="strict"))
    assert said == (
        "incomplete: 2 planned queries unanswered (see above), all given up for good: "
        "damaged batch results lost their lines twice, each loss billed, and no run asks "
        "them again"
    )


def test_a_budget_lowered_on_a_resume_still_names_the_reparse_that_reads_the_kept_replies(
    tmp_path: Path,
) -> None:
    """Fractions under the strict parser, one answer failure each in a first run, then the
    budget lowered to 1: the resume asks none of them, and its closing line still sends its
    user to the lenient reparse that reads their kept replies (it counted only the requests
    whose last attempt said their budget was spent)."""
    from typer.testing import CliRunner

    from runs.cli import app

    def spec(budget: int) -> Path:
        path = tmp_path / f"budget{budget}.toml"
        path.write_text(
            f'name = "strict"\nseed = 1\nparser = "strict"\nmax_attempts = {budget}\n'
            f'max_answer_failures = {budget}\nsim_faults = "server_error=0.5"\n'
            '[data]\nstock_days = 2\n[[models]]\nname = "fractions"\nprovider = "sim"\n'
            'model = "sim-fraction"\n[[arms]]\nname = "baseline"\n',
            encoding="utf-8",
        )  # fmt: skip
        return path

    out = tmp_path / "run"
    CliRunner().invoke(app, ["run", str(spec(2)), "--out", str(out)])
    resumed = CliRunner().invoke(app, ["run", str(spec(1)), "--out", str(out)])
    assert resumed.exit_code == 4, resumed.output
    said = resumed.output.replace("\n", "")
    assert "incomplete: 28 planned queries unanswered" in said
    assert "of them spent their answer-failure budget" in said  # some gave up on max_attempts
    assert f"first try `dutchbook reparse {out} --parser lenient`, which reads their kept " \
        "replies again without a call)" in said
