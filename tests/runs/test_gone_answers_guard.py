"""The guard against scoring a folder whose answers are gone with their replies
(`runs.scored_from.gone_shards`, `runs.lost_answers`), against the ways a tester got past
it: a reparse that read nothing, a shard pair of another run copied over the folder's own,
the record deleted beside the shards, and a reparse older than the record."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from engine.journal import list_segments
from engine.ledger import Ledger
from engine.records import AttemptRecord, ResponseRecord, utc_now
from runs.scored_from import answers_now, gone_shards, record_scored_from
from tests.runs.quiet_campaign import (
    campaign_fixtures,
    copy_of,
    invoke,
    retried_spec,
    run_quietly,
)

SPEC = retried_spec("guard", 4)
_SCORED = ("forecasts.parquet", "scores.parquet", "averaged.parquet")


finished, run_dir = campaign_fixtures("guard", SPEC)


def _kept(run_dir: Path) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes() for name in _SCORED}


def _delete(run_dir: Path, *kinds: str) -> None:
    for kind in kinds:
        for shard in (run_dir / kind).glob("*.parquet"):
            shard.unlink()


def test_a_reparse_of_answers_gone_with_their_replies_is_refused(run_dir: Path) -> None:
    """A reparse of a folder whose shards were deleted with their attempts said "accepted 0
    -> 0", exit 0, and wrote a shard and a reparses.jsonl line, which `score` then took for
    the ones gone: "scored 0 answered sets" over the run's forecasts, the only copy left."""
    _delete(run_dir, "responses", "attempts")
    kept = _kept(run_dir)
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 2, said
    assert said == (
        f"error: {run_dir}: answers it was scored from are gone from responses/ "
        "(part-00000001.parquet, named in scored-from.json) and no reparse replaced them; a "
        "reparse cannot rebuild them, so nothing was replaced: restore responses/ (and "
        "attempts/) from a backup of the folder, then reparse again\n"
    )
    assert not list((run_dir / "responses").iterdir())
    assert not (run_dir / "logs" / "reparses.jsonl").exists()
    assert invoke("score", str(run_dir))[0] == 2
    assert _kept(run_dir) == kept


def test_a_reparse_without_the_attempts_is_refused(run_dir: Path) -> None:
    """With attempts/ deleted and responses/ kept, a reparse rebuilt the answers from their
    own rows: a strict one of this lenient run dropped every answer strict rejects, with
    the only copy of its reply."""
    _delete(run_dir, "attempts")
    shard = (run_dir / "responses" / "part-00000001.parquet").read_bytes()
    code, said = invoke("reparse", str(run_dir), "--parser", "strict")
    answers = pl.read_parquet(run_dir / "responses" / "part-00000001.parquet").height
    assert code == 2 and said == (
        f"error: {run_dir}: {answers} answers in responses/ have no attempt in attempts/ "
        "(deleted or replaced), so a reparse could not read their replies and would drop "
        "those its parser rejects; nothing was replaced: restore responses/ (and attempts/) "
        "from a backup of the folder, then reparse again\n"
    ), said
    assert (run_dir / "responses" / "part-00000001.parquet").read_bytes() == shard


def test_a_reparse_before_an_earlier_build_accounts_for_nothing(run_dir: Path) -> None:
    """A reparse line an earlier build wrote where it read nothing, after the record, and
    the shard it wrote, vouch for no shard gone."""
    _delete(run_dir, "responses", "attempts")
    pl.read_parquet(run_dir / "forecasts.parquet").clear().write_parquet(
        run_dir / "responses" / "part-00000002.parquet"
    )
    at = json.loads((run_dir / "scored-from.json").read_text())["at"]
    line = {"at": at, "parser": "lenient", "requests_with_replies": 0, "accepted_before": 0}
    (run_dir / "logs" / "reparses.jsonl").write_text(json.dumps(line) + "\n")
    assert gone_shards(run_dir) == {"scored-from.json": ["part-00000001.parquet"]}


def test_another_runs_shard_pair_copied_over_the_folders_own_is_refused(
    run_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Another run's answers and attempts copied over the folder's own, under the same
    names: `score` refused them as answers the plan does not hold, saying to `reparse
    --parser strict`, which left no answer, and `score` then wrote 0 rows over the
    forecasts. The record's size for the shard tells it was replaced: refused as gone, by
    `score`, `repair` and `reparse`, the files kept."""
    spec = retried_spec("other", 9).replace("stock_days = 2", "stock_days = 4")
    other = run_quietly(tmp_path_factory.mktemp("other"), "other", spec)
    for kind in ("responses", "attempts"):  # the other's, whole, under the folder's name
        (own,) = (run_dir / kind).glob("*.parquet")
        pl.read_parquet(other / kind / "*.parquet").write_parquet(own)
    (named,) = (run_dir / "responses").glob("*.parquet")
    kept = _kept(run_dir)
    code, said = invoke("score", str(run_dir))
    assert code == 2 and said.startswith(
        f"error: {run_dir}: answers it was scored from are gone from responses/ "
        f"({named.name} replaced by another file, named in scored-from.json) and no "
        "reparse replaced them; "
    ), said
    assert invoke("reparse", str(run_dir), "--parser", "strict")[0] == 2
    assert invoke("score", str(run_dir))[0] == 2
    assert _kept(run_dir) == kept


def _result(index: int) -> tuple[AttemptRecord, ResponseRecord]:
    """An accepted attempt and its answer, of request `index`."""
    rid, now = f"req-{index}", utc_now()
    attempt = AttemptRecord(
        request_id=rid, attempt=1, model="m", provider="sim", started_at=now,
        elapsed_ms=3.0, outcome="ok", http_status=200, provider_request_id=None,
        retry_after_s=None, tokens_in=10, tokens_out=3, detail="",
    )
    answer = ResponseRecord(
        request_id=rid, model="m", arm="baseline", unit=f"u{index}", pass_=0, events=["e"],
        keys=["p"], raw_text='{"p": 0.5}', values=[0.5], finish_reason="stop",
        tokens_in=10, tokens_out=3, attempts=1, accepted_at=now,
    )  # fmt: skip
    return attempt, answer


def test_a_segment_folded_again_after_a_kill_is_no_shard_replaced(tmp_path: Path) -> None:
    """A kill between a fold's shard and the removal of its segment leaves both, and the
    next open folds the segment again under the same name. `score`, which does not compact,
    recorded that shard: the fold again writes it from the same sealed segment, the same
    size, so it is not taken for a shard replaced."""
    ledger = Ledger.open(tmp_path)
    for index in range(20):
        ledger.record_dispatch(f"req-{index}", 1, "m", "sim", utc_now())
        ledger.record_result(*_result(index))
    segments = {path: path.read_bytes() for _, path in list_segments(tmp_path / "journal")}
    ledger.close()  # folds the segment into part-<id> and removes it
    for path, text in segments.items():
        path.write_bytes(text)  # as a kill before the removal left it
    record_scored_from(tmp_path, answers_now(tmp_path))
    assert json.loads((tmp_path / "scored-from.json").read_text())["responses"]
    Ledger.open(tmp_path).close()  # the next open folds it again
    assert not list_segments(tmp_path / "journal")
    assert gone_shards(tmp_path) == {}


def test_score_and_repair_refuse_where_the_record_went_with_the_answers(
    finished: Path, tmp_path: Path
) -> None:
    """With the shards, their attempts and the record deleted, `score` wrote 0-row forecasts
    over the run's, exit 0: with no record, nothing named the shards gone. A folder holding
    no answer beside forecasts (or repairs) of answers is refused, unless a reparse since
    accounts for it (a strict one that took none)."""
    run_dir = copy_of(finished, tmp_path)
    assert invoke("repair", str(run_dir))[0] == 0
    _delete(run_dir, "responses", "attempts")
    for name in ("scored-from.json", "repaired-from.json"):
        (run_dir / name).unlink()
    kept = _kept(run_dir) | {"repaired.parquet": (run_dir / "repaired.parquet").read_bytes()}
    for command, output, files, then in (
        ("score", "forecasts.parquet", ", ".join(_SCORED), "score again"),
        ("repair", "repaired.parquet", "repaired.parquet", "repair again"),
    ):
        code, said = invoke(command, str(run_dir))
        assert code == 2 and said.startswith(
            f"error: {run_dir}: the folder's answers are gone (responses/ holds none, where "
            f"{output} holds answers) and no reparse accounts for it; "
        ), said
        assert said.endswith(
            f"so nothing was written (kept: {files}): restore responses/ (and attempts/) from "
            f"a backup of the folder, then {then}\n"
        ), said
    assert {name: (run_dir / name).read_bytes() for name in kept} == kept
    # A reparse begun since, which took no answer, is what left none: scored as it is.
    line = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "parser": "strict"}
    (run_dir / "logs" / "reparses.jsonl").write_text(json.dumps(line) + "\n")
    assert invoke("score", str(run_dir))[0] == 0



def test_a_reparse_before_the_scores_accounts_for_no_shard_gone_later(run_dir: Path) -> None:
    """Reparsed, then scored, then resumed (a second shard): deleting the shard the scores
    were computed from, with the attempts, passed the guard (20 -> 5 sets), the old reparse
    and the later shard taken for a replacement."""
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 0, said
    lines = (run_dir / "logs" / "reparses.jsonl").read_text().splitlines()
    early = [json.loads(line) | {"at": "2001-01-01T00:00:00+00:00"} for line in lines]
    (run_dir / "logs" / "reparses.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in early)
    )  # before the score below, whatever the clock's second
    assert invoke("score", str(run_dir))[0] == 0
    (scored,) = (run_dir / "responses").glob("*.parquet")
    rows = pl.read_parquet(scored)
    rows.head(1).write_parquet(scored.with_name("part-00000099.parquet"))  # a resume's
    scored.unlink()
    _delete(run_dir, "attempts")
    kept = _kept(run_dir)
    assert gone_shards(run_dir) == {"scored-from.json": [scored.name]}
    code, said = invoke("score", str(run_dir))
    assert code == 2 and f"({scored.name}, named in scored-from.json)" in said, said
    assert _kept(run_dir) == kept


def test_a_record_without_its_time_after_a_reparse_is_no_gone_answer(run_dir: Path) -> None:
    """An earlier build rewrote scored-from.json after its reparse (still naming the shards
    the reparse replaced, with no `at`), and a folder copied without its times dates the
    record at the copy: dating such a record by its file's time put it after the reparse,
    and a healthy folder, scored then reparsed, was refused as one whose answers were gone.
    Any reparse logged accounts for a record with no time of its own."""
    record_path = run_dir / "scored-from.json"
    record = json.loads(record_path.read_text())  # naming the shards the reparse replaces
    assert invoke("reparse", str(run_dir), "--parser", "strict")[0] == 0
    assert record.pop("at", None) is not None  # as an earlier build wrote it
    record_path.write_text(json.dumps(record))  # and its file's time after the reparse's:
    later = datetime.now(UTC).timestamp() + 5  # seconds after (a copy's time, or a slow close)
    os.utime(record_path, (later, later))
    assert not all((run_dir / "responses" / name).exists() for name, *_ in record["responses"])
    assert gone_shards(run_dir) == {}
    assert invoke("score", str(run_dir))[0] == 0
