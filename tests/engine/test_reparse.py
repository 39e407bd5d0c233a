"""Re-parse: rebuild answers from kept replies, no network, atomic replacement of responses."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from engine.answers import parse_answer
from engine.durable import write_atomic
from engine.ledger import Ledger, LedgerBusy
from engine.records import RESPONSE_SCHEMA, AttemptRecord, ResponseRecord, responses_frame
from engine.reparse import answers_digest, reparse
from engine.scan import accepted_ids, scan_attempts, scan_responses
from engine.shards import (
    INTENT_NAME,
    list_shards,
    settle_replacement,
    shard_name,
    visible_shards,
)

T0 = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)

# request id → (keys, replies in attempt order). Under strict, the first strictly valid
# reply was accepted and every earlier one was rejected as invalid_response.
REPLIES: dict[str, tuple[list[str], list[str]]] = {
    "frac": (["probability"], ['{"probability": "11/36"}', '{"probability": 0.3056}']),
    "pct": (["probability"], ['```json\n{"probability": "35%"}\n```', '{"probability": 0,35}']),
    "plain": (["probability"], ['{"probability": 0.8}']),
    "grouped": (
        ["Q01", "Q02"],
        ['Sure: {"Q01": 1/4, "Q02": "75%"}', '{"Q01": 0.2, "Q02": 0.7}'],
    ),
    "hopeless": (["probability"], ['{"probability": "0,5"}', "I cannot answer that."]),
    # Cut off by the output cap and unparseable under strict: recorded as truncated.
    "cut": (["probability"], ['{"probability": "2/3"} and my reasoning is that']),
}


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("re-parse opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _strict_run(run_dir: Path) -> None:
    """What a strict-mode dispatch would have recorded for REPLIES."""
    plan: list[dict[str, Any]] = [
        {"request_id": rid, "model": "m1", "arm": "grouped" if len(keys) > 1 else "baseline",
         "unit": "AAPL@2024-01-02", "events": [f"e{i}" for i in range(len(keys))],
         "keys": keys, "pass": 0, "seed": 1, "system": "s", "user": "u"}
        for rid, (keys, _) in REPLIES.items()
    ]
    pl.DataFrame(plan).write_parquet(run_dir / "plan.parquet")
    with Ledger.open(run_dir) as ledger:
        for rid, (keys, texts) in REPLIES.items():
            row = next(p for p in plan if p["request_id"] == rid)
            for n, text in enumerate(texts, start=1):
                try:
                    parsed = parse_answer(text, keys, "strict")
                except Exception as exc:  # AnswerError: recorded with its raw text
                    outcome = "truncated" if rid == "cut" else "invalid_response"
                    attempt = _attempt(rid, n, outcome, str(exc), text)
                    ledger.record_result(attempt, None)
                    continue
                response = ResponseRecord(
                    request_id=rid, model="m1", arm=row["arm"], unit=row["unit"], pass_=0,
                    events=row["events"], keys=keys, raw_text=text,
                    values=[parsed[k] for k in keys], finish_reason="stop", tokens_in=90,
                    tokens_out=9, attempts=n, accepted_at=T0 + timedelta(hours=n),
                )
                ledger.record_result(_attempt(rid, n, "ok", "", None), response)
                break


def _attempt(rid: str, n: int, outcome: str, detail: str, raw: str | None) -> AttemptRecord:
    return AttemptRecord(
        request_id=rid, attempt=n, model="m1", provider="sim",
        started_at=T0 + timedelta(minutes=n), elapsed_ms=250.0, outcome=outcome,
        http_status=200, provider_request_id=None, retry_after_s=None, tokens_in=90,
        tokens_out=9, detail=detail, raw_text=raw, finish_reason="stop",
    )


def _answers(run_dir: Path) -> dict[str, tuple[int, list[float]]]:
    frame = scan_responses(run_dir).select("request_id", "attempts", "values").collect()
    return {rid: (n, values) for rid, n, values in frame.iter_rows()}


def test_lenient_rescues_fractions_and_strict_restores_the_original(
    tmp_path: Path, no_network: None
) -> None:
    _strict_run(tmp_path)
    original = scan_responses(tmp_path).sort("request_id").collect()
    attempts_before = scan_attempts(tmp_path).sort("request_id", "attempt").collect()
    assert _answers(tmp_path) == {
        "frac": (2, [0.3056]), "plain": (1, [0.8]), "grouped": (2, [0.2, 0.7]),
    }

    lenient = reparse(tmp_path, "lenient")
    got = _answers(tmp_path)
    assert got["frac"][0] == 1 and got["frac"][1] == pytest.approx([11 / 36], abs=1e-15)
    assert got["pct"] == (1, [0.35])
    assert got["grouped"] == (1, [0.25, 0.75])
    assert got["plain"] == (1, [0.8])
    assert got["cut"][0] == 1 and got["cut"][1] == pytest.approx([2 / 3], abs=1e-15)
    assert "hopeless" not in got
    assert (lenient.newly_accepted, lenient.newly_rejected) == (2, 0)
    assert (lenient.values_changed, lenient.unchanged) == (2, 1)
    assert lenient.still_rejected_by_subcause == {"not_json": 1}  # hopeless's last reply
    rescued = scan_responses(tmp_path).filter(pl.col("request_id") == "pct").collect()
    assert rescued["raw_text"][0].startswith("```json")
    assert rescued["keys"][0].to_list() == ["probability"]

    strict = reparse(tmp_path, "strict")
    assert (strict.newly_accepted, strict.newly_rejected, strict.values_changed) == (0, 2, 2)
    restored = scan_responses(tmp_path).sort("request_id").collect()
    assert restored.drop("accepted_at").equals(original.drop("accepted_at"))
    # History is untouched: the attempts table never changes.
    after = scan_attempts(tmp_path).sort("request_id", "attempt").collect()
    assert after.equals(attempts_before)
    assert len(list_shards(tmp_path / "responses")) == 1
    assert not (tmp_path / "responses" / INTENT_NAME).exists()
    # The round trip's answers digest as the run's did, and each step's as it changed.
    assert strict.answers_digest_after == lenient.answers_digest_before
    assert lenient.answers_digest_after == strict.answers_digest_before
    assert strict.answers_digest_after != strict.answers_digest_before


def test_the_answers_digest_is_their_content_not_their_order() -> None:
    """`answers_digest`: the same answers in another order or shards digest the same; one
    value, one accepted attempt, one answer more or less digests otherwise."""
    rows = [
        ResponseRecord(
            request_id=f"r{i}", model="m1", arm="baseline", unit="u", pass_=1, events=["e0"],
            keys=["probability"], raw_text="{}", values=[0.1 * i + 0.05], finish_reason="stop",
            tokens_in=1, tokens_out=1, attempts=1, accepted_at=T0,
        ).to_row()
        for i in range(5)
    ]
    frame = responses_frame(rows)
    digest = answers_digest(frame)
    assert answers_digest(pl.concat([frame.tail(2), frame.head(3)])) == digest
    assert answers_digest(frame.with_columns(raw_text=pl.lit("other"))) == digest  # unscored
    value = frame.with_columns(
        values=pl.when(pl.col("request_id") == "r3").then(pl.lit([0.36])).otherwise("values")
    )
    attempt = frame.with_columns(attempts=pl.when(pl.col("request_id") == "r0").then(2)
                                 .otherwise("attempts"))
    for changed in (value, attempt, frame.head(4)):
        assert answers_digest(changed) != digest


def test_reparse_of_a_strict_run_with_strict_changes_nothing(
    tmp_path: Path, no_network: None
) -> None:
    _strict_run(tmp_path)
    before = scan_responses(tmp_path).sort("request_id").collect()
    summary = reparse(tmp_path, "strict")
    assert summary.unchanged == 3 and summary.values_changed == 0
    assert scan_responses(tmp_path).sort("request_id").collect().equals(before)


def test_a_reparse_leaves_a_dead_runs_record_that_it_died(tmp_path: Path) -> None:
    """It wrote its own pid file over the dead run's and cleared it at the end: `status`
    then read "stopped" (closed cleanly), and the audit lost its note that the run died."""
    import socket
    import subprocess
    import sys

    from engine.status import status

    _strict_run(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that named a process once and names none now, on this host
    record = orjson.dumps({"pid": gone.pid, "create_time": 0.0, "host": socket.gethostname()})
    (tmp_path / "run.pid").write_bytes(record)
    assert status(tmp_path)["state"] == "died"
    reparse(tmp_path, "lenient")
    assert (tmp_path / "run.pid").read_bytes() == record
    assert status(tmp_path)["state"] == "died"


def test_a_reparse_writes_no_pid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed part-way, the reparse's own pid file stayed: `status` called the folder a run
    that died ever after, and a later reparse put that pid back as a dead run's."""
    import engine.reparse
    from engine.scan import scan_responses as real  # what engine.reparse imported and calls

    _strict_run(tmp_path)  # `looking` stands for it under the ledger, before any rebuild
    seen: list[bool] = []

    def looking(*args: Any, **kw: Any) -> Any:
        seen.append((tmp_path / "run.pid").exists())
        return real(*args, **kw)

    monkeypatch.setattr(engine.reparse, "scan_responses", looking)
    reparse(tmp_path, "lenient")
    assert seen and not any(seen)
    assert not (tmp_path / "run.pid").exists()


def test_reparse_refuses_a_live_run(tmp_path: Path) -> None:
    _strict_run(tmp_path)
    with Ledger.open(tmp_path), pytest.raises(LedgerBusy):
        reparse(tmp_path, "lenient")


def _frame(ids: list[str]) -> pl.DataFrame:
    rows = [
        ResponseRecord(
            request_id=rid, model="m", arm="a", unit="u", pass_=0, events=["e"],
            keys=["probability"], raw_text="{}", values=[0.5], finish_reason=None,
            tokens_in=None, tokens_out=None, attempts=1, accepted_at=T0,
        ).to_row()
        for rid in ids
    ]
    frame = pl.DataFrame(rows, schema={**RESPONSE_SCHEMA, "accepted_at": pl.String()})
    return frame.with_columns(pl.col("accepted_at").str.to_datetime(time_zone="UTC"))


def test_interrupted_replacement_is_finished_or_abandoned(tmp_path: Path) -> None:
    """The intent protocol: before the commit rename the old set stands, after it the new."""
    write_atomic(_frame(["a", "b"]), tmp_path / shard_name(1))
    write_atomic(_frame(["c"]), tmp_path / shard_name(2))
    intent = orjson.dumps({"new": shard_name(3), "old": [shard_name(1), shard_name(2)]})
    (tmp_path / INTENT_NAME).write_bytes(intent)
    # Killed before the commit: the new shard is only a temp file.
    _frame(["z"]).write_parquet(tmp_path / f".{shard_name(3)}.tmp")
    assert [p.name for p in visible_shards(tmp_path)] == [shard_name(1), shard_name(2)]
    settle_replacement(tmp_path)
    assert not (tmp_path / INTENT_NAME).exists()
    assert len(list_shards(tmp_path)) == 2
    # Killed after the commit, before deleting the old shards.
    (tmp_path / INTENT_NAME).write_bytes(intent)
    write_atomic(_frame(["z"]), tmp_path / shard_name(3))
    assert [p.name for p in visible_shards(tmp_path)] == [shard_name(3)]
    settle_replacement(tmp_path)
    assert [p.name for _, p in list_shards(tmp_path)] == [shard_name(3)]


def test_ledger_open_settles_an_interrupted_replacement(tmp_path: Path) -> None:
    _strict_run(tmp_path)
    responses = tmp_path / "responses"
    old = [p.name for _, p in list_shards(responses)]
    write_atomic(_frame(["only"]), responses / shard_name(999))
    (responses / INTENT_NAME).write_bytes(orjson.dumps({"new": shard_name(999), "old": old}))
    assert set(scan_responses(tmp_path).collect()["request_id"]) == {"only"}
    with Ledger.open(tmp_path) as ledger:
        assert accepted_ids(ledger.run_dir) == {"only"}
    assert [p.name for _, p in list_shards(responses)] == [shard_name(999)]


def test_command_line(tmp_path: Path, no_network: None) -> None:
    from runs.cli import app

    _strict_run(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["reparse", str(tmp_path), "--parser", "lenient", "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.output)["newly_accepted"] == 2
    result = runner.invoke(app, ["reparse", str(tmp_path), "--parser", "strict"])
    assert result.exit_code == 0, result.output
    assert "newly rejected 2" in result.output
    bad = runner.invoke(app, ["reparse", str(tmp_path), "--parser", "loose"])
    assert bad.exit_code != 0


def _unwritable_record(run_dir: Path) -> None:
    """`logs/reparses.jsonl` cannot be appended to (a folder stands in its place: what a
    `logs/` of another user's gives a process that is not root)."""
    (run_dir / "logs" / "reparses.jsonl").mkdir(parents=True)


def _denied_replacement(monkeypatch: pytest.MonkeyPatch) -> None:
    """`responses/` refuses the new shard, as polars reports it for a folder without write
    permission."""

    def denied(self: Ledger, frame: pl.DataFrame) -> Path:
        raise PermissionError("Permission denied (os error 13): responses/.part.parquet.tmp")

    monkeypatch.setattr(Ledger, "replace_responses", denied)


@pytest.mark.parametrize("unwritable", ["record", "responses"])
def test_a_reparse_that_cannot_write_ends_in_one_line_and_changes_no_answer(
    tmp_path: Path, no_network: None, monkeypatch: pytest.MonkeyPatch, unwritable: str
) -> None:
    """Before, with `logs/` not writable the reparse replaced strict's answers with lenient's,
    exit 0, and recorded no parser, so every later command called the new answers lost; with
    `responses/` not writable it ended in a traceback."""
    from runs.cli import app

    _strict_run(tmp_path)
    before = _answers(tmp_path)
    if unwritable == "record":
        _unwritable_record(tmp_path)
    else:
        _denied_replacement(monkeypatch)
    result = CliRunner().invoke(app, ["reparse", str(tmp_path), "--parser", "lenient"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert _answers(tmp_path) == before


@pytest.mark.parametrize(
    ("ledger_held", "run_live", "said"),
    [(True, False, False), (True, True, True), (False, False, True), (False, True, True)],
)
def test_a_reparse_still_running_is_not_called_unfinished(
    tmp_path: Path, ledger_held: bool, run_live: bool, said: bool
) -> None:
    """Its begun line is the last while it writes its shard (seconds at paper scale): a
    `status` beside it said "did not finish ... run it again". The ledger's lock held and no
    run live is that reparse (it writes no pid file); a live run holding it is a later
    command, and the reparse before it did not finish; nothing holding it, it stopped."""
    from engine.reparse import REPARSES_FILE, unfinished_line
    from engine.runlock import PID_FILE, acquire_lock, release_lock, write_pid

    (tmp_path / REPARSES_FILE).parent.mkdir()
    (tmp_path / REPARSES_FILE).write_bytes(orjson.dumps(
        {"at": datetime.now(UTC).isoformat(timespec="seconds"), "parser": "strict",
         "begun": True}) + b"\n")  # fmt: skip
    (tmp_path / "journal").mkdir()
    if run_live:
        write_pid(tmp_path)  # this process: alive
    held = acquire_lock(tmp_path, tmp_path / "journal") if ledger_held else None
    try:
        line = unfinished_line(tmp_path)
    finally:
        if held is not None:
            release_lock(held)
    assert (line is not None) is said, line
    (tmp_path / PID_FILE).unlink(missing_ok=True)  # the writer gone: unfinished
    assert unfinished_line(tmp_path) is not None


def _reparse_lines(run_dir: Path, lines: list[tuple[str, bool]]) -> None:
    """`logs/reparses.jsonl` of reparses (parser, finished), oldest first: a begun line
    each, then a finished one for those that finished."""
    from engine.reparse import REPARSES_FILE

    (run_dir / REPARSES_FILE).parent.mkdir(exist_ok=True)
    records = []
    for parser, finished in lines:
        records.append({"at": T0.isoformat(), "parser": parser, "begun": True})
        if finished:
            records.append({"at": T0.isoformat(), "parser": parser})
    (run_dir / REPARSES_FILE).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))


@pytest.mark.parametrize(
    ("lines", "maybe", "ok_accepted", "refused"),
    [
        ([], [], True, None),
        ([("strict", True)], ["strict"], False, "were last parsed with strict"),
        ([("strict", False)], ["strict"], False,
         "may have been parsed with strict (a `dutchbook reparse --parser strict` begun at "),
        ([("strict", True), ("lenient", True)], ["lenient"], True, None),
        # Stopped on the way back: the answers may still be strict's.
        ([("strict", True), ("lenient", False)], ["lenient", "strict"], False,
         "may still be those a strict reparse left: the `dutchbook reparse --parser lenient` "
         "begun after it at "),
        ([("lenient", True), ("lenient", False)], ["lenient", "lenient"], True, None),
        # Neither finished: the answers may be strict's or the ones before it.
        ([("strict", False), ("lenient", False)], ["lenient", "strict"], False,
         "may be those of a strict reparse that did not finish, or the ones before it: the "
         "`dutchbook reparse --parser lenient` begun after it at "),
    ],
    ids=["none", "strict", "strict-unfinished", "round-trip", "back-unfinished",
         "lenient-twice", "both-unfinished"],
)
def test_the_parsers_a_folder_may_hold_answers_of(
    tmp_path: Path, lines: list[tuple[str, bool]], maybe: list[str], ok_accepted: bool,
    refused: str | None,
) -> None:
    """A lenient reparse back from strict that did not finish was taken for the parser in
    force: a reply recorded `ok` then meant an answer lost from responses/, where strict's
    answers, which may still be the folder's, rejected it."""
    from engine.reparse import ok_means_accepted, parsers_maybe_in_force, resume_refusal

    _reparse_lines(tmp_path, lines)
    assert parsers_maybe_in_force(tmp_path) == maybe
    assert ok_means_accepted(tmp_path, "lenient") is ok_accepted
    assert ok_means_accepted(tmp_path, "strict") is True  # strict takes no reply lenient not
    said = resume_refusal(tmp_path, "lenient", spec="this spec")
    assert (said is None) is (refused is None) and (refused or "") in (said or ""), said
    assert "back from it" not in (said or "")  # "it" named no reparse
    assert resume_refusal(tmp_path, "strict", spec="this spec") is None


def _counted(parser: str, begun: bool, before: int | None, after: int | None) -> dict[str, Any]:
    """A reparse line; a count None is left out, as a build before the counts wrote it."""
    line: dict[str, Any] = {"at": T0.isoformat(), "parser": parser}
    if begun:
        line["begun"] = True
    counts = {"accepted_before": before, "accepted_after": after}
    return {**line, **{k: v for k, v in counts.items() if v is not None}}


@pytest.mark.parametrize(
    ("lines", "fewest"),
    [
        ([], None),
        ([("strict", True, 56, 28), ("strict", False, 56, 28)], 28),  # begun, then finished
        # A lenient reparse back stopped on the way: strict's 28 or its 56.
        ([("strict", False, 56, 28), ("lenient", True, 28, 56)], 28),
        ([("strict", False, 56, 28), ("lenient", True, None, None)], 28),  # never the fewer
        # The first reparse stopped: the run's own 56 or strict's 28.
        ([("strict", True, 56, 28)], 28),
        ([("strict", True, None, None)], None),  # a begun line that counted nothing
        ([("lenient", False, 28, 56), ("strict", True, 56, 20)], 20),  # a folder of old lines
        ([("lenient", False, 28, 56), ("strict", True, None, None)], None),
        ([("strict", False, 56, "28")], None),  # a count edited into text
    ],
    ids=["none", "strict", "back-stopped", "back-stopped-uncounted", "strict-stopped",
         "strict-stopped-uncounted", "strict-after-lenient", "strict-after-lenient-uncounted",
         "damaged"],
)
def test_the_fewest_answers_a_folder_may_hold(
    tmp_path: Path, lines: list[tuple[str, bool, Any, Any]], fewest: int | None
) -> None:
    """After a strict reparse of a lenient run, a reply recorded `ok` with no answer was
    always taken for one strict rejected, so answers lost from responses/ were not refused:
    `score` scored 0 answered sets, exit 0. Nothing but a reparse removes an answer, so the
    answers a folder holds are at least the fewest any reparse whose answers it may hold
    left, each line saying how many it found and left."""
    from engine.reparse import REPARSES_FILE, fewest_answers

    (tmp_path / REPARSES_FILE).parent.mkdir()
    records = [_counted(*line) for line in lines]
    (tmp_path / REPARSES_FILE).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert fewest_answers(tmp_path) == fewest


class _Part:
    """A part `engine.reparse._collected_ahead` collects, saying in `started` when its read
    begins; `interrupted`, its read ends in a KeyboardInterrupt, which the part's awaiting
    re-raises where a Ctrl-C arriving then would be raised."""

    def __init__(self, number: int, started: list[int], interrupted: bool = False) -> None:
        self.number, self.started, self.interrupted = number, started, interrupted

    def collect(self) -> pl.DataFrame:
        self.started.append(self.number)
        if self.interrupted:
            raise KeyboardInterrupt
        return pl.DataFrame({"part": [self.number]})


def test_an_interrupt_while_a_part_is_awaited_starts_no_part_after_it() -> None:
    """`_collected_ahead` asked for the next part before awaiting this one, and its pool's
    exit waited for whatever was queued: a Ctrl-C while part 1 was awaited read part 2 as
    well before it let go. Now the next part is asked for once this one is read: an
    interrupt while part 1 is awaited ends the reads there, no part after it begun."""
    from engine.reparse import _collected_ahead

    started: list[int] = []
    parts = (_Part(n, started, interrupted=n == 1) for n in range(5))
    ahead = _collected_ahead(cast(Iterator[pl.LazyFrame], parts))
    assert next(ahead)["part"].to_list() == [0]
    with pytest.raises(KeyboardInterrupt):
        next(ahead)
    assert started == [0, 1]
    assert next(ahead, None) is None  # ended
