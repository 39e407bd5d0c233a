"""A resume's `batch_max_lines` below Bedrock's 199 (`runs.spec.check_batch_floor`), judged by
the queries the folder has left to ask: refused where they would leave some waiting below
Bedrock's floor of 100 lines a job, in one line, and taken where they cut cleanly into jobs.
Refused on every resume before, whatever was left, though only 199 lines a job cut every
count and a resume has one count to cut."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from engine.batch_jobs import BatchJob, JobRecords, fold_jobs
from engine.batch_lane import lines_to_cut, next_line
from engine.ledger import Ledger
from engine.plan import PLAN_COLUMNS, plan_items
from engine.scan import scan_attempts
from providers.batch import JobState, JobStatus
from providers.batch_bedrock import LIMITS as BEDROCK_LIMITS
from runs.batch_bytes import answer_budget, left_sizes, sizing_client
from runs.design import SPEC_FILE, freeze_design
from runs.pipeline import run_campaign
from runs.planner import write_plan
from runs.rehearsal import mark_folder
from runs.spec import SpecError, load_spec
from runs.units import UnitSource
from tests.engine.conftest import attempt_row, response_row

#: 16 days of data: 224 queries, the count a tester's jobs of 100 left 24 of waiting.
SPEC = """
name = "floor"
seed = 3
sim_faults = "batch_seconds=0"
[data]
stock_days = 16
[[models]]
name = "claude"
provider = "bedrock"
model = "us.anthropic.claude-sonnet-5-v1:0"
region = "us-east-1"
dispatch = "batch"
batch_bucket = "s3://dutchbook-rehearsal/batch"
batch_role_arn = "arn:aws:iam::123456789012:role/dutchbook-batch"
batch_max_lines = {cap}
[[arms]]
name = "baseline"
"""
PLANNED = 224


def _folder(tmp_path: Path, answered: int) -> tuple[Path, Path]:
    """A rehearsal's run folder planned at 199 lines a job with `answered` of its queries
    answered, and the spec resuming it at 100."""
    first, resume = tmp_path / "first.toml", tmp_path / "resume.toml"
    first.write_text(SPEC.format(cap=199), encoding="utf-8")
    resume.write_text(SPEC.format(cap=100), encoding="utf-8")
    out = tmp_path / "out"
    spec = load_spec(first)
    freeze_design(spec, out)
    mark_folder(out, rehearse=True)  # a rehearsal's folder, as the resumes below rehearse
    write_plan(spec, out, UnitSource.from_spec(spec))
    ids = pl.read_parquet(out / "plan.parquet", columns=["request_id"])["request_id"]
    assert len(ids) == PLANNED
    with Ledger.open(out) as ledger:
        for rid in ids.to_list()[:answered]:
            ledger.record_result(attempt_row(rid, 1, "claude", "ok", provider="bedrock"),
                                 response_row(rid, 1, "claude"))  # fmt: skip
    return resume, out


def _run(spec: Path, out: Path) -> object:
    console = Console(file=io.StringIO(), width=400)
    return asyncio.run(run_campaign(spec, out, rehearse=True, console=console, progress=False))


def test_a_resume_whose_queries_left_would_strand_some_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """224 left at 100 a job: two jobs of 100 and 24 waiting for ever."""
    spec, out = _folder(tmp_path, answered=0)
    frozen = (out / SPEC_FILE).read_bytes()
    with pytest.raises(SpecError) as info:
        _run(spec, out)
    said = str(info.value)
    assert info.value.key == "models[0].batch_max_lines" and "\n" not in said
    assert ("at least 199 (or left out) for a bedrock batch model, not 100: bedrock's jobs "
            "hold at least 100 lines, and the 224 queries its folder has left to ask cannot be "
            "cut into jobs of 100 lines: 24 would wait for ever") in said
    assert (out / SPEC_FILE).read_bytes() == frozen  # refused before the change was recorded
    assert fold_jobs(out) == {}


@pytest.mark.timeout(180)
def test_a_resume_whose_queries_left_cut_cleanly_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """24 answered, 200 left: two jobs of 100, none waiting."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = _folder(tmp_path, answered=PLANNED - 200)
    result = _run(spec, out)
    summary = getattr(result, "summary", None)
    assert summary is not None and summary.complete, summary
    assert sorted(len(job.requests) for job in fold_jobs(out).values()) == [100, 100]


def _byte_refusal(said: str) -> int:
    """The least `batch_max_bytes` a refusal names."""
    found = re.search(r"models\[0\]\.batch_max_bytes: at least (\d+) \(or left out\)", said)
    assert found is not None, said
    return int(found.group(1))


@pytest.mark.timeout(180)
def test_a_byte_cap_that_cuts_jobs_below_the_floor_is_refused_before_any_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`batch_max_bytes = 50000` cut these 224 Bedrock queries into jobs of 21 lines, each
    refused at creation ("the job needs at least 100 records"), three in a row stopping the
    lane after the run had started; `plan` said nothing. Both refuse it now, once the prompts
    are rendered and before anything is written, naming the least cap, which is taken."""
    from typer.testing import CliRunner

    from runs.cli import app

    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    path, out = tmp_path / "spec.toml", tmp_path / "out"
    path.write_text(SPEC.format(cap="199\nbatch_max_bytes = 50000"), encoding="utf-8")
    least = 0
    for args in (["plan", str(path)], ["run", str(path), "--rehearse", "--out", str(out)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        least = _byte_refusal(said)
        assert (f"for a bedrock batch model, not 50000: bedrock's jobs hold at least 100 lines, "
                f"and at 50000 bytes a job holds as few as 20 of the lines of its 224 planned "
                f"queries; at {least} it holds any 199 of them") in said, said
    assert not out.exists()
    path.write_text(SPEC.format(cap=f"199\nbatch_max_bytes = {least - 1}"), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        _run(path, out)
    assert _byte_refusal(str(info.value)) == least and not out.exists()
    path.write_text(SPEC.format(cap=f"199\nbatch_max_bytes = {least}"), encoding="utf-8")
    summary = getattr(_run(path, out), "summary", None)
    assert summary is not None and summary.complete, summary
    assert sorted(len(job.requests) for job in fold_jobs(out).values()) == [100, 124]


def test_a_resume_whose_byte_cap_cuts_its_lines_left_below_the_floor_is_refused(
    tmp_path: Path,
) -> None:
    """Judged by the lines its folder has left to ask, before the design is frozen."""
    spec, out = _folder(tmp_path, answered=24)
    spec.write_text(SPEC.format(cap="199\nbatch_max_bytes = 50000"), encoding="utf-8")
    frozen = (out / SPEC_FILE).read_bytes()
    with pytest.raises(SpecError) as info:
        _run(spec, out)
    said = str(info.value)
    assert info.value.key == "models[0].batch_max_bytes" and "\n" not in said
    assert "of the lines of the 200 queries its folder has left to ask; at " in said
    assert (out / SPEC_FILE).read_bytes() == frozen  # refused before the change was recorded
    assert fold_jobs(out) == {}


#: A job the simulator inside a rehearsal held when a kill ended it, as its jobs file says.
GONE_JOB_ID = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/gone0000000001"


def _held_by_the_ended_simulator(
    out: Path, held: list[str], *, created: bool = True, attempt: int = 1
) -> None:
    """`out`'s jobs file as a rehearsal killed with a job of `held` left it, each sent as its
    request's `attempt`: planned by the lane of the simulator inside that run
    (`simulated_in_process`), uploaded, created when `created`. A resume's own simulator has
    never heard of it: the lane gives it up at its 404 and asks its lines again in new jobs
    (`engine.batch_lane.asked_again`)."""
    records = JobRecords(out)
    job = BatchJob(job_key="db-claude-gone00000001", model="claude", provider="bedrock",
                   requests=dict.fromkeys(held, attempt), simulated_in_process=True)  # fmt: skip
    records.planned(job)
    records.uploaded(job, "s3://dutchbook-rehearsal/batch/db-claude-gone00000001/input.jsonl")
    if created:
        records.created(job, JobState(GONE_JOB_ID, JobStatus.RUNNING, "InProgress"))


def _line_bytes(spec: Path, out: Path) -> dict[str, int]:
    """Each plan row's batch line, in bytes (newline aside), as the resume's lane writes it."""
    resume = load_spec(spec)
    config = resume.model("claude")
    client, budget = sizing_client(config), answer_budget(resume)
    frame = pl.read_parquet(out / "plan.parquet").select(PLAN_COLUMNS)
    return {item.request_id: len(next_line(client, config, item, budget))
            for item in plan_items(frame, {})}  # fmt: skip


def test_a_resume_counts_the_lines_of_a_job_its_simulator_ended_with(tmp_path: Path) -> None:
    """A rehearsal killed with a job of 24 lines held: its simulator ended with it, so the
    resume asks those 24 again with the 200 others, 224 in new jobs, 24 of which jobs of 100
    strand. The check counted 200 (the job's lines left out as held) and took the cap; the
    24 then waited for ever."""
    spec, out = _folder(tmp_path, answered=0)
    ids = pl.read_parquet(out / "plan.parquet", columns=["request_id"])["request_id"].to_list()
    _held_by_the_ended_simulator(out, ids[:24])
    with pytest.raises(SpecError) as info:
        _run(spec, out)
    assert info.value.key == "models[0].batch_max_lines"
    assert ("the 224 queries its folder has left to ask cannot be cut into jobs of 100 lines: "
            "24 would wait for ever") in str(info.value)
    budget = answer_budget(load_spec(spec))
    plan = out / "plan.parquet"
    # Not in a resume that re-attaches to it (an outside simulator's, a provider's): 200.
    assert lines_to_cut(out, plan, "claude", budget) == 200
    assert lines_to_cut(out, plan, "claude", budget, simulated_here=True) == PLANNED
    # Asked live, not in new jobs, with batch_fallback = "live".
    assert lines_to_cut(out, plan, "claude", budget, simulated_here=True,
                        fallback_live=True) == 200  # fmt: skip


def test_a_job_not_created_is_re_attached_and_an_abandoned_one_asked_again(
    tmp_path: Path,
) -> None:
    """A job the ended simulator never created is created under its own key (its lines stay
    in it); a job recorded abandoned before a kill has its lines asked again, whatever the
    simulator."""
    _spec, out = _folder(tmp_path, answered=0)
    plan = out / "plan.parquet"
    ids = pl.read_parquet(plan, columns=["request_id"])["request_id"].to_list()
    _held_by_the_ended_simulator(out, ids[:24], created=False)
    assert lines_to_cut(out, plan, "claude", 3, simulated_here=True) == 200
    job = next(iter(fold_jobs(out).values()))
    job.job_id = GONE_JOB_ID
    JobRecords(out).abandoned(job, "not found")
    assert lines_to_cut(out, plan, "claude", 3) == PLANNED


@pytest.mark.timeout(180)
def test_a_resume_sizes_the_lines_of_a_job_its_simulator_ended_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rehearsal killed with a job of its 120 longest lines held: the resume asks them
    again with the 104 others. The byte check sized only those 104 and named a cap that
    holds 104 of the shorter lines, below which the 120 longer ones come back to be cut
    (jobs under the floor, or lines stranded). It sizes all 224 now, and the cap it names
    runs the resume to the end."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = _folder(tmp_path, answered=0)
    sizes = _line_bytes(spec, out)
    longest = sorted(sizes, key=lambda rid: sizes[rid], reverse=True)
    held, rest = longest[:120], longest[120:]
    _held_by_the_ended_simulator(out, held)
    limits = BEDROCK_LIMITS
    too_few = limits.least_max_bytes([sizes[rid] for rid in rest])  # what the check named
    least = limits.least_max_bytes(list(sizes.values()))
    assert too_few < least
    for cap in (too_few, least - 1):
        spec.write_text(SPEC.format(cap=f"199\nbatch_max_bytes = {cap}"), encoding="utf-8")
        with pytest.raises(SpecError) as info:
            _run(spec, out)
        assert _byte_refusal(str(info.value)) == least
        assert "of the lines of the 224 queries its folder has left to ask" in str(info.value)
    spec.write_text(SPEC.format(cap=f"199\nbatch_max_bytes = {least}"), encoding="utf-8")
    summary = getattr(_run(spec, out), "summary", None)
    assert summary is not None and summary.complete, summary
    jobs = fold_jobs(out)
    assert jobs["db-claude-gone00000001"].abandoned  # given up at its 404, its lines asked again
    cut = [len(job.requests) for key, job in jobs.items() if key != "db-claude-gone00000001"]
    assert sum(cut) == PLANNED and min(cut) >= limits.min_lines, cut


def _one_attempt(spec: Path) -> None:
    """`spec` with `max_attempts = 1` (its answer-failure budget 1 with it)."""
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("seed = 3\n", "seed = 3\nmax_attempts = 1\n"), encoding="utf-8")


@pytest.mark.timeout(180)
def test_a_resume_with_one_attempt_leaves_out_the_lines_it_gives_up_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rehearsal killed with a job of 24 lines held, resumed with `max_attempts = 1`: the
    lane journals each of the 24 as an attempt no line ran for, its one try of the dispatch,
    and gives them up; it cuts only the 200 others, two jobs of 100. The check counted the 24
    as asked again and refused the resume ("24 would wait for ever")."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = _folder(tmp_path, answered=0)
    _one_attempt(spec)
    plan = out / "plan.parquet"
    ids = pl.read_parquet(plan, columns=["request_id"])["request_id"].to_list()
    _held_by_the_ended_simulator(out, ids[:24])
    assert lines_to_cut(out, plan, "claude", 1, simulated_here=True, max_attempts=1) == 200
    assert lines_to_cut(out, plan, "claude", 1, simulated_here=True, max_attempts=2) == PLANNED
    _sizes_then_cuts_the_other_200(tmp_path, spec, out)
    gone = scan_attempts(out, ["request_id"]).filter(pl.col("request_id").is_in(ids[:24]))
    assert gone.collect().height == 24  # one try each, none asked again


def _sizes_then_cuts_the_other_200(tmp_path: Path, spec: Path, out: Path) -> None:
    """The byte check sizes the 200 lines the line check counts, and the resume abandons the
    ended simulator's job and cuts those 200 into two jobs of 100."""
    capped = tmp_path / "capped.toml"
    capped.write_text(spec.read_text(encoding="utf-8").replace(
        "batch_max_lines = 100", "batch_max_lines = 100\nbatch_max_bytes = 500000"),
        encoding="utf-8")  # fmt: skip
    plan = out / "plan.parquet"
    assert len(left_sizes(load_spec(capped), out, plan, frozenset({"claude"}))["claude"]) == 200
    _run(spec, out)
    jobs = fold_jobs(out)
    assert jobs["db-claude-gone00000001"].abandoned
    cut = sorted(len(job.requests) for key, job in jobs.items() if key != "db-claude-gone00000001")
    assert cut == [100, 100]


def test_a_line_journalled_before_a_kill_is_asked_again_with_one_attempt(
    tmp_path: Path,
) -> None:
    """Of an abandoned job killed while it was collected, a line already journalled is no try
    of the resume's (`BatchLane._already`): asked again, so counted, with `max_attempts = 1`;
    the lines not journalled yet are given up at their one try."""
    _spec, out = _folder(tmp_path, answered=0)
    plan = out / "plan.parquet"
    ids = pl.read_parquet(plan, columns=["request_id"])["request_id"].to_list()
    _held_by_the_ended_simulator(out, ids[:24])
    job = next(iter(fold_jobs(out).values()))
    JobRecords(out).abandoned(job, "not found")
    with Ledger.open(out) as ledger:
        for rid in ids[:4]:
            ledger.record_result(attempt_row(rid, 1, "claude", "provider_error",
                                             provider="bedrock"), None)  # fmt: skip
    assert lines_to_cut(out, plan, "claude", 1, max_attempts=1) == 200 + 4
    assert lines_to_cut(out, plan, "claude", 1, max_attempts=6) == PLANNED


@pytest.mark.timeout(180)
def test_a_resume_leaves_out_the_lines_damaged_results_lost_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rehearsal killed while it collected a job of 24 lines whose damaged results lost
    each of them, lines an earlier job's damaged results had lost too: the second loss of
    each is journalled, the job not yet recorded collected. The resume's lane gives each up
    as lost twice (`_damaged_twice`), never buying it a third time, and cuts only the 200
    others, two jobs of 100. The check counted the 24 as asked again and refused the resume
    ("24 would wait for ever"), at any `max_attempts`."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.05")
    spec, out = _folder(tmp_path, answered=0)
    plan = out / "plan.parquet"
    ids = pl.read_parquet(plan, columns=["request_id"])["request_id"].to_list()
    _held_by_the_ended_simulator(out, ids[:24], attempt=2)
    with Ledger.open(out) as ledger:
        for rid in ids[:24]:
            for n in (1, 2):
                ledger.record_result(attempt_row(rid, n, "claude", "damaged_batch_result",
                                                 provider="bedrock"), None)  # fmt: skip
    budget = answer_budget(load_spec(spec))
    assert lines_to_cut(out, plan, "claude", budget, simulated_here=True) == 200
    _sizes_then_cuts_the_other_200(tmp_path, spec, out)
    lost = scan_attempts(out, ["request_id"]).filter(pl.col("request_id").is_in(ids[:24]))
    assert lost.collect().height == 48  # the two losses each, none bought a third time


def test_lines_damaged_results_lost_twice_in_collected_jobs_are_not_counted(
    tmp_path: Path,
) -> None:
    """Two jobs collected, each losing the same 24 lines to damaged results, the run ended:
    a resume gives the 24 up unasked (`engine.scan.lost_to_damage`), as the lane did, and
    the check counts only the 200 others, as it sizes them. It counted 224 and refused the
    resume at 100 a job ("24 would wait for ever")."""
    spec, out = _folder(tmp_path, answered=0)
    plan = out / "plan.parquet"
    ids = pl.read_parquet(plan, columns=["request_id"])["request_id"].to_list()
    with Ledger.open(out) as ledger:
        for rid in ids[:24]:
            for n in (1, 2):
                ledger.record_result(attempt_row(rid, n, "claude", "damaged_batch_result",
                                                 provider="bedrock"), None)  # fmt: skip
        # Lost once only: asked again.
        ledger.record_result(attempt_row(ids[24], 1, "claude", "damaged_batch_result",
                                         provider="bedrock"), None)  # fmt: skip
    budget = answer_budget(load_spec(spec))
    assert lines_to_cut(out, plan, "claude", budget) == 200
    capped = tmp_path / "capped.toml"
    capped.write_text(spec.read_text(encoding="utf-8").replace(
        "batch_max_lines = 100", "batch_max_lines = 100\nbatch_max_bytes = 500000"),
        encoding="utf-8")  # fmt: skip
    assert len(left_sizes(load_spec(capped), out, plan, frozenset())["claude"]) == 200
