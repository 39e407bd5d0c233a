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
from runs.scored_from import gone_shards
from tests.runs.quiet_campaign import invoke, retried_spec, run_quietly

SPEC = retried_spec("lost", 4)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lost")
    run_quietly(root, "lost", SPEC)
    code, said = invoke("repair", str(root / "run"))
    assert code == 0, said
    return root


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run, its answers file deleted; the spec beside it."""
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    for shard in (tmp_path / "run" / "responses").glob("*.parquet"):
        shard.unlink()
    return tmp_path / "run"


_OUTPUT = ("scores.parquet", "forecasts.parquet", "averaged.parquet", "repaired.parquet")


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


def _refusal(run_dir: Path, would: str, then: str) -> str:
    return (
        f"error: {run_dir}: 28 accepted answers are missing from responses/ (their replies are "
        f"kept in the ledger); {would}: run `dutchbook reparse {run_dir} --parser lenient` "
        f"first, which rebuilds them without a call, then {then}\n"
    )


@pytest.mark.parametrize("in_their_place", ["nothing", "a folder"])
def test_score_repair_and_report_refuse_and_keep_what_they_wrote(
    finished: Path, run_dir: Path, in_their_place: str
) -> None:
    """A hostile tester's `repair` of a finished run with responses/ deleted wrote a 0-row
    repaired.parquet over the good one ("repaired 0 answered sets", exit 0), and `score`
    scored 0 answered sets; so with the one answers file replaced by a folder, which is
    named, with the reparse to run once it is moved aside (the reparse refuses it)."""
    folder = run_dir / "responses" / "part-00000001.parquet"
    if in_their_place == "a folder":
        folder.mkdir()
    good = {name: (finished / "run" / name).read_bytes() for name in _OUTPUT}
    refusals = {
        "score": ("scoring now would replace its scores with those of the answers left",
                  "score again"),
        "repair": ("repairing now would write repaired.parquet from the answers left",
                   "repair again"),
        "report": ("a report now would not match its answers",
                   f"`dutchbook score {run_dir}`, then this command"),
    }  # fmt: skip
    for command, (would, then) in refusals.items():
        refusal = _refusal(run_dir, would, then)
        if in_their_place == "a folder":
            refusal = (
                f"error: damaged file in the run folder: {folder} (a folder where a file goes; "
                "move it aside (rename it to part-00000001.parquet.damaged, say), then "
                f"`dutchbook reparse {run_dir} --parser lenient` rebuilds the answers from the "
                "replies kept in attempts/, without a call)\n"
            )
        assert invoke(command, str(run_dir)) == (2, refusal), command
    assert {name: (run_dir / name).read_bytes() for name in _OUTPUT} == good


def test_a_folder_in_place_of_the_answers_is_named_and_reparse_then_rebuilds(
    finished: Path, run_dir: Path
) -> None:
    """The remedy works: reparse named the folder in one line (it ended in polars'
    "expanded paths were empty" traceback); moved aside, it rebuilds the answers and
    `score` and `repair` write what they wrote before."""
    shard = run_dir / "responses" / "part-00000001.parquet"
    shard.mkdir()
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert (code, said) == (
        2,
        (
            f"error: damaged file in the run folder: {shard} (a folder where a file goes; move "
            "it aside (rename it to part-00000001.parquet.damaged, say), then `dutchbook "
            f"reparse {run_dir} --parser lenient` rebuilds the answers from the replies kept in "
            "attempts/, without a call)\n"
        ),
    )
    shard.rename(shard.with_name("part-00000001.parquet.moved"))
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0 and "accepted 0 → 28" in said, said
    for command in ("score", "repair"):
        code, said = invoke(command, str(run_dir))
        assert code == 0, said
    for name in ("scores.parquet", "repaired.parquet"):
        before = pl.read_parquet(finished / "run" / name)
        assert pl.read_parquet(run_dir / name).equals(before), name


_RECORDS = ("scored-from.json", "repaired-from.json")


def test_score_and_repair_refuse_when_the_replies_are_gone_too(
    finished: Path, run_dir: Path
) -> None:
    """A tester deleted the attempts' shards beside the answers': with no reply kept, nothing
    counted them lost, and `score` wrote 0-row forecasts and scores over the finished run's
    (the only copy of its stated probabilities left) and a record of no answers, exit 0,
    then `repair` "repaired 0 answered sets". The record names the shard that is gone."""
    for shard in (run_dir / "attempts").glob("*.parquet"):
        shard.unlink()
    kept = {name: (run_dir / name).read_bytes() for name in (*_OUTPUT, *_RECORDS)}
    written = {
        "score": ("scoring now would replace its scores with those of the answers left",
                  "forecasts.parquet, scores.parquet, averaged.parquet", "score again"),
        "repair": ("repairing now would write repaired.parquet from the answers left",
                   "repaired.parquet", "repair again"),
    }  # fmt: skip
    for command, (would, files, then) in written.items():
        assert invoke(command, str(run_dir)) == (
            2,
            f"error: {run_dir}: answers it was scored from are gone from responses/ "
            "(part-00000001.parquet, named in scored-from.json and repaired-from.json) and no "
            f"reparse replaced them; {would}, so nothing was written (kept: {files}): restore "
            f"responses/ (and attempts/) from a backup of the folder, then {then}\n",
        ), command
    assert {name: (run_dir / name).read_bytes() for name in kept} == kept


def _files(run_dir: Path) -> dict[str, bytes]:
    """Every file of the folder, by path within it."""
    return {
        str(path.relative_to(run_dir)): path.read_bytes()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    }


def test_a_resume_refuses_when_the_replies_are_gone_too(run_dir: Path) -> None:
    """With the attempts' shards deleted beside the answers', `score` and `repair` refused,
    but a resume asked every request again (and, of a real provider, paid for each), then
    scored the new answers over the run's forecasts and scores, exit 0. It now refuses
    before anything is asked, naming the shard, and the folder is left as it was."""
    for shard in (run_dir / "attempts").glob("*.parquet"):
        shard.unlink()
    kept = _files(run_dir)
    code, said = invoke("run", str(run_dir.parent / "lost.toml"), "--out", str(run_dir))
    assert (code, said) == (
        2,
        f"error: {run_dir}: answers it was scored from are gone from responses/ "
        "(part-00000001.parquet, named in scored-from.json and repaired-from.json) and no "
        "reparse replaced them; resuming would ask (and pay for) their requests again and "
        "score the new answers over these, so nothing was asked (kept: forecasts.parquet, "
        "scores.parquet, averaged.parquet, repaired.parquet): restore responses/ (and "
        "attempts/) from a backup of the folder, then run again; or, to ask every answer "
        "again, run the spec into a new folder (`--out`) and keep this one as it is\n",
    )
    assert _files(run_dir) == kept


def _move_to_a_second_shard(run_dir: Path, kind: str, ids: set[str]) -> None:
    """Move the rows of `ids` from `kind`'s first shard into a second, as a resume that asked
    them after the run was scored leaves it (the records, of the first shard as it is now:
    a resume adds a shard and changes none)."""
    first = run_dir / kind / "part-00000001.parquet"
    rows = pl.read_parquet(first)
    second = first.with_name("part-00000002.parquet")
    rows.filter(pl.col("request_id").is_in(ids)).write_parquet(second)
    rows.filter(~pl.col("request_id").is_in(ids)).write_parquet(first)
    for name in _RECORDS if kind == "responses" else ():
        record = json.loads((run_dir / name).read_text())
        record["responses"] = [[first.name, first.stat().st_size]]
        (run_dir / name).write_text(json.dumps(record))


def test_a_resume_still_goes_on_where_no_answer_is_gone(finished: Path, tmp_path: Path) -> None:
    """What the refusal is not: a folder never scored (no record: a run killed in its
    dispatch), and one whose answers a later resume added a shard to after it was scored
    (the record names fewer shards than the folder holds) resume as before. A reparse's
    replacing every shard is `test_a_resume_refuses_to_pay_again_and_reparse_rebuilds_them`."""
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    run_dir, spec = tmp_path / "run", tmp_path / "lost.toml"
    answered = pl.read_parquet(run_dir / "responses" / "part-00000001.parquet")["request_id"]
    later = set(answered.sort().to_list()[: answered.len() // 2])
    for kind in ("responses", "attempts"):
        _move_to_a_second_shard(run_dir, kind, later)
    ok_before = _ok_attempts(run_dir)
    code, said = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 0, said
    assert _ok_attempts(run_dir) == ok_before  # nothing asked again
    for name in _RECORDS:
        (run_dir / name).unlink()
    for shard in (*run_dir.glob("responses/*.parquet"), *run_dir.glob("attempts/*.parquet")):
        shard.unlink()
    code, said = invoke("run", str(spec), "--out", str(run_dir))
    assert code == 0, said
    assert _ok_attempts(run_dir) == ok_before  # asked: the folder held no answer, nor a record


def test_only_a_reparse_accounts_for_a_shard_gone(run_dir: Path) -> None:
    """Only a reparse removes an answers shard: every one at once, leaving its own of a
    higher id, after a line in logs/reparses.jsonl. A shard a resume added accounts for no
    shard gone, nor does a reparse for one gone of two the record names, nor one whose line
    does not say it began after the record was written."""
    gone = {name: ["part-00000001.parquet"] for name in _RECORDS}
    responses = run_dir / "responses"
    (responses / "part-00000009.parquet").write_bytes(b"")  # not read: a name is enough
    assert gone_shards(run_dir) == gone
    reparses = run_dir / "logs" / "reparses.jsonl"
    reparses.write_text('{"parser": "lenient"}\n')  # no time: not after the record
    assert gone_shards(run_dir) == gone
    at = max(json.loads((run_dir / name).read_text())["at"] for name in _RECORDS)
    reparses.write_text(json.dumps({"at": at, "parser": "lenient"}) + "\n")
    assert gone_shards(run_dir) == {}  # replaced by the reparse's shard
    record = json.loads((run_dir / "scored-from.json").read_text())
    record["responses"].insert(0, ["part-00000000.parquet", 0])
    (run_dir / "scored-from.json").write_text(json.dumps(record))
    (responses / "part-00000000.parquet").write_bytes(b"")
    assert gone_shards(run_dir) == {"scored-from.json": ["part-00000001.parquet"]}


@pytest.mark.parametrize("gone", ["every shard", "the first of two"])
def test_status_says_the_answers_are_gone_not_that_the_run_never_started(
    finished: Path, tmp_path: Path, gone: str
) -> None:
    """With its attempts gone too, a finished run read "not started", its last words
    "No attempts recorded yet", and a warning to `repair`, which then refused; where a
    later resume had added the second of two shards, "stopped", half its requests "attempted
    so far": both read as a run to resume, which is refused too."""
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    run_dir = tmp_path / "run"
    if gone == "the first of two":
        answered = pl.read_parquet(run_dir / "responses" / "part-00000001.parquet")["request_id"]
        for kind in ("responses", "attempts"):
            _move_to_a_second_shard(run_dir, kind, set(answered.to_list()[::2]))
    for shard in run_dir.glob("*/part-00000001.parquet"):
        shard.unlink()
    code, said = invoke("status", str(run_dir))
    assert code == 0 and said.startswith(f"{run_dir}: answers missing\n"), said
    assert (
        "warning: answers it was scored from are gone from responses/ (part-00000001.parquet, "
        "named in scored-from.json and repaired-from.json) and no reparse replaced them: "
        "restore responses/ (and attempts/) from a backup of the folder; a resume (`dutchbook "
        "run`), `score` and `repair` refuse the folder until then; or, to ask every answer "
        "again, run the spec into a new folder (`--out`) and keep this one as it is\n"
    ) in said, said
    assert "writes it again" not in said, said
    summary = json.loads(invoke("status", str(run_dir), "--json")[1])
    state = "not started" if gone == "every shard" else "stopped"  # --json's as it was
    assert summary["answers_gone"] is True and summary["state"] == state
