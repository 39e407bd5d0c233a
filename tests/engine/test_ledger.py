"""The ledger's promises: exactly once, nothing lost, readable by anyone while running."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest.mock import patch

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.ledger
from engine.journal import list_segments
from engine.ledger import Ledger, LedgerBusy
from engine.records import AttemptRecord, ResponseRecord
from engine.runlock import read_pid, write_pid
from engine.scan import (
    accepted_ids,
    attempt_counts,
    attempts_in_parts,
    found_among,
    scan_attempts,
    scan_responses,
)
from engine.shards import list_shards, shard_name

T0 = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)


def attempt(rid: str, n: int, outcome: str = "ok", raw: str | None = None) -> AttemptRecord:
    return AttemptRecord(
        request_id=rid,
        attempt=n,
        model="m1",
        provider="sim",
        started_at=T0 + timedelta(seconds=n),
        elapsed_ms=12.5,
        outcome=outcome,
        http_status=200 if outcome == "ok" else 429,
        provider_request_id=f"p-{rid}-{n}",
        retry_after_s=None if outcome == "ok" else 1.5,
        tokens_in=100,
        tokens_out=7,
        detail="" if outcome == "ok" else f"{outcome}: details",
        raw_text=raw,
    )


def response(rid: str, n: int, value: float = 0.25) -> ResponseRecord:
    return ResponseRecord(
        request_id=rid,
        model="m1",
        arm="baseline",
        unit="AAPL@2024-01-02",
        pass_=1,
        events=["d1:B0"],
        keys=["probability"],
        raw_text=f'{{"probability": {value}}}',
        values=[value],
        finish_reason="stop",
        tokens_in=100,
        tokens_out=7,
        attempts=n,
        accepted_at=T0 + timedelta(minutes=n),
    )


def accepted(ledger: Ledger, *request_ids: str) -> list[bool]:
    """`Ledger.accepted_series` for a few ids, as Python booleans."""
    ids = pl.Series(list(request_ids), dtype=pl.String)
    result: list[bool] = ledger.accepted_series(ids).to_list()
    return result


def accept(ledger: Ledger, rid: str, n: int = 1, value: float = 0.25) -> bool:
    ledger.record_dispatch(rid, n, "m1", "sim", T0)
    return ledger.record_result(attempt(rid, n), response(rid, n, value))


def test_open_creates_layout_and_pid_file(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "run") as ledger:
        for name in ("journal", "attempts", "responses"):
            assert (ledger.run_dir / name).is_dir()
        info = read_pid(ledger.run_dir)
        assert info is not None and info["alive"] is True
    assert read_pid(tmp_path / "run") is None  # a clean close removes it


def test_records_round_trip_through_journal_and_shards(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    ledger.record_dispatch("a", 1, "m1", "sim", T0)
    ledger.record_result(attempt("a", 1, "rate_limit"), None)
    assert accept(ledger, "a", 2, 0.4)
    assert accept(ledger, "b", 1, 0.6)
    # While open: all rows still in the journal.
    before_attempts = scan_attempts(tmp_path).sort("request_id", "attempt").collect()
    before_responses = scan_responses(tmp_path).sort("request_id").collect()
    ledger.close()
    assert list_segments(tmp_path / "journal") == []  # a finished run leaves no journal
    after_attempts = scan_attempts(tmp_path).sort("request_id", "attempt").collect()
    after_responses = scan_responses(tmp_path).sort("request_id").collect()
    assert before_attempts.equals(after_attempts)
    assert before_responses.equals(after_responses)
    rows = [AttemptRecord.from_row(r) for r in after_attempts.iter_rows(named=True)]
    assert rows[0] == attempt("a", 1, "rate_limit")
    # The accepted attempt keeps the raw reply too, so re-parse needs only attempts.
    assert rows[1].raw_text == '{"probability": 0.4}'
    got = [ResponseRecord.from_row(r) for r in after_responses.iter_rows(named=True)]
    assert got == [response("a", 2, 0.4), response("b", 1, 0.6)]
    assert after_responses["pass"].to_list() == [1, 1]
    # Anyone can read the folder without our code.
    assert pl.read_parquet(tmp_path / "responses" / "*.parquet").height == 2


def test_duplicate_acceptance_is_refused_even_after_reopen(tmp_path: Path) -> None:
    with Ledger.open(tmp_path) as ledger:
        assert accept(ledger, "a", 1, 0.1)
        assert not accept(ledger, "a", 2, 0.9)
        assert accepted_ids(ledger.run_dir) == {"a"}
    with Ledger.open(tmp_path) as ledger:
        assert not accept(ledger, "a", 3, 0.9)
    responses = scan_responses(tmp_path).collect()
    assert responses["values"].to_list() == [[0.1]]
    attempts = scan_attempts(tmp_path).sort("attempt").collect()
    assert attempts["attempt"].to_list() == [1, 2, 3]  # the paid attempts are still recorded
    assert all("duplicate" in d for d in attempts["detail"].to_list()[1:])


def _die(ledger: Ledger) -> None:
    """Simulate kill -9: drop descriptors without compacting or clearing anything."""
    import os

    assert ledger._writer is not None and ledger._lock_fd is not None
    os.close(ledger._writer._fd)  # type: ignore[arg-type]
    os.close(ledger._lock_fd)
    ledger._writer = None
    ledger._lock_fd = None


def test_unfinished_dispatch_becomes_one_interrupted_attempt(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    assert accept(ledger, "done", 1)
    ledger.record_dispatch("lost", 1, "m1", "sim", T0)
    ledger.record_dispatch("lost", 2, "m1", "sim", T0)
    ledger.record_result(attempt("lost", 1, "timeout"), None)
    _die(ledger)
    again = Ledger.open(tmp_path)
    assert again.interrupted_recovered == 1
    assert attempt_counts(again.run_dir) == {"done": 1, "lost": 2}
    _die(again)
    third = Ledger.open(tmp_path)
    assert third.interrupted_recovered == 0
    third.close()
    rows = scan_attempts(tmp_path).filter(pl.col("request_id") == "lost").sort("attempt").collect()
    assert rows["outcome"].to_list() == ["timeout", "interrupted"]
    assert accepted_ids(tmp_path) == {"done"}


def test_in_flight_dispatch_survives_compaction(tmp_path: Path) -> None:
    """A compaction between dispatch and result must not turn the attempt into a loss."""
    ledger = Ledger.open(tmp_path)
    ledger.record_dispatch("slow", 1, "m1", "sim", T0)
    accept(ledger, "fast", 1)
    ledger.compact()
    ledger.compact()
    _die(ledger)
    reopened = Ledger.open(tmp_path)  # "slow" never finished: interrupted, exactly once
    assert reopened.interrupted_recovered == 1
    reopened.close()
    ledger = Ledger.open(tmp_path)
    ledger.record_dispatch("slow", 2, "m1", "sim", T0)
    ledger.compact()
    ledger.record_result(attempt("slow", 2), response("slow", 2))
    ledger.close()
    assert Ledger.open(tmp_path).interrupted_recovered == 0
    outcomes = scan_attempts(tmp_path).sort("request_id", "attempt").collect()["outcome"]
    assert outcomes.to_list() == ["ok", "interrupted", "ok"]


def test_kill_between_compaction_steps_neither_loses_nor_duplicates(tmp_path: Path) -> None:
    """Shard written but segment not yet deleted: readers dedupe, reopen redoes the fold."""
    ledger = Ledger.open(tmp_path)
    for i in range(5):
        accept(ledger, f"r{i}", 1)
    ledger.record_result(attempt("x", 1, "provider_error"), None)
    saved = {p.name: p.read_bytes() for _, p in list_segments(tmp_path / "journal")}
    ledger.compact()
    _die(ledger)
    for name, data in saved.items():  # put the folded segment back, as if unlink never ran
        (tmp_path / "journal" / name).write_bytes(data)
    assert scan_attempts(tmp_path).collect().height == 6
    assert scan_responses(tmp_path).collect().height == 5
    reopened = Ledger.open(tmp_path)
    reopened.close()
    assert scan_attempts(tmp_path).collect().height == 6
    assert sorted(accepted_ids(tmp_path)) == [f"r{i}" for i in range(5)]
    assert len(list_shards(tmp_path / "responses")) == 1


def test_second_writer_is_refused(tmp_path: Path) -> None:
    with Ledger.open(tmp_path), pytest.raises(LedgerBusy):
        Ledger.open(tmp_path)


def test_readers_see_everything_while_writer_compacts(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    for i in range(30):
        accept(ledger, f"r{i:02d}", 1)
        if i % 7 == 0:
            ledger.compact()
        assert scan_responses(tmp_path).collect().height == i + 1
        assert scan_attempts(tmp_path).collect().height == i + 1
    ledger.close()


@pytest.mark.parametrize(("part_bytes", "heights"), [(1, [3, 3, 3, 1]), (10**9, [9, 1])])
def test_attempts_in_parts_are_every_attempt_a_few_shards_at_a_time(
    tmp_path: Path, part_bytes: int, heights: list[int]
) -> None:
    """The reader of the replies' text that `engine.reparse.lost_after_reparse` holds a
    part at a time: the shards up to `part_bytes` of them a part (a bigger shard alone), the
    journal's last; every attempt, as `scan_attempts` reads them."""
    ledger = Ledger.open(tmp_path)
    for i in range(9):
        accept(ledger, f"r{i}", 1)
        if i % 3 == 2:
            ledger.compact()  # three shards of three answers
    accept(ledger, "r9", 1)  # in the journal
    columns = ["request_id", "attempt"]
    parts = [part.collect() for part in attempts_in_parts(tmp_path, columns, part_bytes)]
    every = scan_attempts(tmp_path, columns).sort(columns).collect()
    ledger.close()
    assert [part.height for part in parts] == heights
    assert parts[-1]["request_id"].to_list() == ["r9"]
    assert pl.concat(parts).sort(columns).equals(every)


def test_attempts_in_parts_start_a_part_with_an_empty_first_shard(tmp_path: Path) -> None:
    """A first shard of 0 bytes (a file cut short) ended `attempts_in_parts` in an
    IndexError before any part, where the part was started only by a shard bigger than
    none: it is a part of its own, which its reader finds unreadable as every reader of the
    shards does, and the shards after it are read as before."""
    with Ledger.open(tmp_path) as ledger:
        for i in range(3):
            accept(ledger, f"r{i}", 1)
    (tmp_path / "attempts" / shard_name(0)).touch()
    shards = list_shards(tmp_path / "attempts")
    assert shards[0][1].stat().st_size == 0 and len(shards) == 2
    columns = ["request_id", "attempt"]
    parts = list(attempts_in_parts(tmp_path, columns, 1))
    assert len(parts) == 2
    with pytest.raises(pl.exceptions.ComputeError):
        parts[0].collect()
    assert sorted(parts[1].collect()["request_id"]) == ["r0", "r1", "r2"]


def test_torn_journal_tail_is_ignored_on_open_and_by_readers(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    accept(ledger, "a", 1)
    segment = list_segments(tmp_path / "journal")[-1][1]
    _die(ledger)
    with segment.open("ab") as handle:
        handle.write(b'{"kind": "result", "attempt": {"request_id": "b"')
    assert accepted_ids(tmp_path) == {"a"}
    with Ledger.open(tmp_path) as reopened:
        assert accepted_ids(reopened.run_dir) == {"a"}
        assert accept(reopened, "b", 1)
    assert accepted_ids(tmp_path) == {"a", "b"}


def test_segment_ids_never_reused_after_compaction(tmp_path: Path) -> None:
    for round_ in range(3):
        with Ledger.open(tmp_path) as ledger:
            accept(ledger, f"r{round_}", 1)
    shards = list_shards(tmp_path / "responses")
    assert len(shards) == 3
    assert accepted_ids(tmp_path) == {"r0", "r1", "r2"}


def test_naive_timestamps_are_refused(tmp_path: Path) -> None:
    with Ledger.open(tmp_path) as ledger, pytest.raises(ValueError, match="timezone"):
        ledger.record_dispatch("a", 1, "m1", "sim", datetime(2026, 1, 1))


@given(
    script=st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from(["ok", "rate_limit", "compact"])),
        max_size=25,
    )
)
def test_any_interleaving_matches_a_simple_model(script: list[tuple[int, str]]) -> None:
    """Accepted = first ok per request; attempts = every result; whatever the compactions."""
    import tempfile

    run_dir = Path(tempfile.mkdtemp())
    try:
        ledger = Ledger.open(run_dir, pid_file=False)
        counts: dict[str, int] = {}
        accepted: dict[str, int] = {}
        for index, action in script:
            rid = f"r{index}"
            if action == "compact":
                ledger.compact()
                continue
            n = counts.get(rid, 0) + 1
            counts[rid] = n
            ledger.record_dispatch(rid, n, "m1", "sim", T0)
            if action == "ok":
                fresh = ledger.record_result(attempt(rid, n), response(rid, n))
                assert fresh == (rid not in accepted)
                accepted.setdefault(rid, n)
            else:
                ledger.record_result(attempt(rid, n, action), None)
        assert attempt_counts(ledger.run_dir) == counts
        ledger.close()
        assert attempt_counts(run_dir) == counts
        some = {k: v for k, v in counts.items() if k in ("r0", "r3")}
        assert attempt_counts(run_dir, ["r0", "r3"]) == some
        got = scan_responses(run_dir).select("request_id", "attempts").collect()
        assert dict(got.iter_rows()) == accepted
        assert scan_attempts(run_dir).collect().height == sum(counts.values())
    finally:
        shutil.rmtree(run_dir)


def test_acceptances_are_found_in_journal_shards_and_after_a_crash(tmp_path: Path) -> None:
    """Resume skips exactly the accepted ids wherever they live: this run's journal, a
    shard, or the journal of a writer that died before compacting."""
    ledger = Ledger.open(tmp_path)
    assert accept(ledger, "a")
    assert list_shards(tmp_path / "responses") == []  # only in the journal so far
    assert accepted(ledger, "a", "b") == [True, False]
    ledger.compact()
    assert len(list_shards(tmp_path / "responses")) == 1
    assert accepted(ledger, "a", "b") == [True, False]
    assert accept(ledger, "b")
    _die(ledger)  # "b" is in a journal segment nobody folded
    again = Ledger.open(tmp_path)
    series = again.accepted_series(pl.Series(["c", "b", "a", "b"]))
    assert series.dtype == pl.Boolean and series.to_list() == [False, True, True, True]
    assert accepted(again, "a", "c") == [True, False]
    assert not accept(again, "b", 2)
    assert accept(again, "c")
    assert accepted_ids(tmp_path) == {"a", "b", "c"}
    again.close()


@pytest.mark.parametrize("fold", [False, True])
def test_an_acceptance_racing_a_search_is_never_cached_as_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fold: bool
) -> None:
    """A search that started before "x" was accepted (by another lane) finds it absent; that
    stale answer must not let a second answer for "x" through later, whether or not a
    compaction folded "x" into a shard while the search ran."""
    ledger = Ledger.open(tmp_path)
    assert accept(ledger, "old")
    ledger.compact()
    real = found_among  # what engine.ledger imported and calls
    raced: list[bool] = []

    def racing(shards: list[Path], ids: pl.Series) -> pl.Series:
        found = real(shards, ids)
        if not raced:
            raced.append(True)
            assert accept(ledger, "x")
            if fold:
                ledger.compact()
        return found

    monkeypatch.setattr(engine.ledger, "found_among", racing)
    ledger.accepted_series(pl.Series(["x", "y"]))
    monkeypatch.undo()
    assert raced
    assert not accept(ledger, "x", 2)
    ledger.compact()
    assert not accept(ledger, "x", 3)
    assert accept(ledger, "y")
    ledger.close()
    assert scan_responses(tmp_path).collect()["request_id"].sort().to_list() == ["old", "x", "y"]


@given(
    script=st.lists(
        st.tuples(
            st.sampled_from(["accept", "fail", "probe", "compact", "reopen", "crash"]),
            st.integers(0, 5),
        ),
        max_size=20,
    )
)
def test_accepted_answers_match_a_simple_model(script: list[tuple[str, int]]) -> None:
    """Whatever the order of answers, probes, compactions, reopenings and crashes: each
    request is accepted once, refused after, and every way of asking agrees with a set.
    The absence cache is kept tiny so that its evictions run too."""
    import tempfile

    run_dir = Path(tempfile.mkdtemp())
    everyone = [f"r{i}" for i in range(6)]
    try:
        with (
            patch.object(engine.ledger, "ABSENT_CACHE_MIN", 1),
            patch.object(engine.ledger, "ABSENT_CACHE_BATCHES", 0),
        ):
            _play(run_dir, script, everyone)
    finally:
        shutil.rmtree(run_dir)


def _play(run_dir: Path, script: list[tuple[str, int]], everyone: list[str]) -> None:
    """Run `script` against a ledger and a set, checking they agree at every step."""
    ledger = Ledger.open(run_dir, pid_file=False)
    model: set[str] = set()
    attempts: dict[str, int] = {}
    for action, index in script:
        rid = f"r{index}"
        assert len(ledger._absent) <= 1
        if action in ("accept", "fail"):
            n = attempts[rid] = attempts.get(rid, 0) + 1
            ledger.record_dispatch(rid, n, "m1", "sim", T0)
            if action == "fail":
                ledger.record_result(attempt(rid, n, "rate_limit"), None)
            else:
                assert ledger.record_result(attempt(rid, n), response(rid, n)) == (rid not in model)
                model.add(rid)
        elif action == "probe":
            assert accepted(ledger, *everyone[index:]) == [r in model for r in everyone[index:]]
            assert accepted(ledger, rid) == [rid in model]
        elif action == "compact":
            ledger.compact()
        elif action == "reopen":
            ledger.close()
            ledger = Ledger.open(run_dir, pid_file=False)
        else:
            _die(ledger)
            ledger = Ledger.open(run_dir, pid_file=False)
    assert accepted_ids(run_dir) == model
    assert ledger.accepted_series(pl.Series(everyone)).to_list() == [r in model for r in everyone]
    ledger.close()
    assert accepted_ids(run_dir) == model
    assert scan_responses(run_dir).collect().height == len(model)


def test_corrupt_journal_is_reported_and_the_lock_released(tmp_path: Path) -> None:
    from engine.journal import JournalError

    ledger = Ledger.open(tmp_path)
    accept(ledger, "a", 1)
    segment = list_segments(tmp_path / "journal")[-1][1]
    _die(ledger)
    lines = segment.read_bytes().split(b"\n")
    lines.insert(1, b'{"kind": "result", "attem')  # a torn line that is NOT the last
    segment.write_bytes(b"\n".join(lines))
    for _ in range(2):  # the same process may try again: no LedgerBusy from a leaked lock
        with pytest.raises(JournalError, match="only the last line") as info:
            Ledger.open(tmp_path)
        assert str(info.value).endswith("mend or delete that line and run again "
                                        "(a deleted result is asked again)")
    # The advice holds: without the bad line the ledger opens, the answer is still there.
    lines.pop(1)
    segment.write_bytes(b"\n".join(lines))
    with Ledger.open(tmp_path):
        pass
    assert accepted_ids(tmp_path) == {"a"}


#: The journal lines of one dispatch and its accepted result, as the ledger wrote them before
#: the records and timestamps were made cheaper (issue 12): the line format is a contract,
#: extended only by adding a field at the end of a row (`model_reported`).
GOLDEN_LINES = (
    b'{"kind":"dispatch","request_id":"r1","attempt":1,"model":"m1","provider":"openai",'
    b'"started_at":"2026-03-01T12:00:05.000007+00:00"}\n'
    b'{"kind":"result","attempt":{"request_id":"r1","attempt":1,"model":"m1",'
    b'"provider":"openai","started_at":"2026-03-01T12:00:05.000007+00:00","elapsed_ms":12.5,'
    b'"outcome":"ok","http_status":200,"provider_request_id":"chatcmpl-1",'
    b'"retry_after_s":null,"tokens_in":57,"tokens_out":9,"detail":"",'
    b'"raw_text":"{\\"Q01\\": 0.25, \\"Q02\\": 0.7}","finish_reason":"stop",'
    b'"model_reported":null},'
    b'"response":{"request_id":"r1","model":"m1","arm":"base","unit":"u1","pass":0,'
    b'"events":["e1","\xc3\xa92"],"keys":["Q01","Q02"],'
    b'"raw_text":"{\\"Q01\\": 0.25, \\"Q02\\": 0.7}","values":[0.25,0.7],'
    b'"finish_reason":"stop","tokens_in":57,"tokens_out":9,"attempts":1,'
    b'"accepted_at":"2026-03-01T12:00:05.999999+00:00"}}\n'
)


def test_journal_lines_are_the_same_bytes_as_before(tmp_path: Path) -> None:
    from datetime import timezone

    started = datetime(2026, 3, 1, 12, 0, 5, 7, tzinfo=UTC)
    with Ledger.open(tmp_path / "run", pid_file=False) as ledger:
        ledger.record_dispatch("r1", 1, "m1", "openai", started)
        ledger.record_result(
            AttemptRecord(
                request_id="r1", attempt=1, model="m1", provider="openai", started_at=started,
                elapsed_ms=12.5, outcome="ok", http_status=200, provider_request_id="chatcmpl-1",
                retry_after_s=None, tokens_in=57, tokens_out=9, detail="",
            ),
            ResponseRecord(
                request_id="r1", model="m1", arm="base", unit="u1", pass_=0,
                events=["e1", "é2"], keys=["Q01", "Q02"], raw_text='{"Q01": 0.25, "Q02": 0.7}',
                values=[0.25, 0.7], finish_reason="stop", tokens_in=57, tokens_out=9, attempts=1,
                # another offset: converted to the same second as the dispatch, in UTC
                accepted_at=datetime(
                    2026, 3, 1, 13, 0, 5, 999999, tzinfo=timezone(timedelta(hours=1))
                ),
            ),
        )
        (_, path), = list_segments(tmp_path / "run" / "journal")
        assert path.read_bytes() == GOLDEN_LINES


def test_a_result_line_is_in_the_file_when_record_result_returns(tmp_path: Path) -> None:
    """The crash contract the journal keeps (one write per line, engine.journal): nothing of
    an attempt waits in the process for a later write that a kill -9 would lose."""
    from engine.journal import read_segment

    with Ledger.open(tmp_path / "run", pid_file=False) as ledger:
        assert accept(ledger, "r1")
        (_, path), = list_segments(tmp_path / "run" / "journal")
        kinds = [(r["kind"], r.get("request_id") or r["attempt"]["request_id"])
                 for r in read_segment(path)]
        assert kinds == [("dispatch", "r1"), ("result", "r1")]


def test_journal_lines_do_not_wait_for_the_sealed_segments_fsync(tmp_path: Path) -> None:
    """Compaction closes (fsyncs) the segment it sealed outside the writers' lock: the event
    loop's journal lines go on while the disk flushes it."""
    import threading

    from engine.journal import JournalWriter

    ledger = Ledger.open(tmp_path / "run")
    ledger.record_dispatch("r1", 1, "m1", "sim", T0)
    in_close, release = threading.Event(), threading.Event()
    close = JournalWriter.close

    def slow_close(self: JournalWriter) -> None:
        if self.lines and not in_close.is_set():  # the sealed segment: r1's dispatch line
            in_close.set()
            release.wait(10)
        close(self)

    with patch.object(JournalWriter, "close", slow_close):
        compaction = threading.Thread(target=ledger.compact)
        compaction.start()
        try:
            assert in_close.wait(10)
            written = threading.Event()

            def write() -> None:
                ledger.record_dispatch("r2", 1, "m1", "sim", T0)
                written.set()

            threading.Thread(target=write, daemon=True).start()
            assert written.wait(2), "a journal line waited for the sealed segment's close"
        finally:
            release.set()
            compaction.join(10)
    ledger.record_result(attempt("r1", 1), response("r1", 1))
    ledger.close()
    assert accepted_ids(tmp_path / "run") == {"r1"}
    assert set(attempt_counts(tmp_path / "run", ["r1", "r2"])) == {"r1", "r2"}


def test_a_pid_file_its_caller_wrote_outlives_the_ledger(tmp_path: Path) -> None:
    # `dutchbook run` writes the pid with the folder's lock and scores and reports after
    # dispatch closed the ledger: the run must still read as live (and a second run be told
    # its pid) until the caller clears it.
    write_pid(tmp_path)
    with Ledger.open(tmp_path):
        pass
    info = read_pid(tmp_path)
    assert info is not None and info["pid"] == os.getpid() and info["alive"]


def test_a_disk_filled_by_the_closing_compaction_keeps_the_journal_for_a_resume(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    polars_loses_enospc: Callable[[Callable[[Path], bool]], None],
) -> None:
    # A small tmpfs filled while the close wrote a response shard; polars lost the ENOSPC
    # and `close` raised its ComputeError: `dutchbook run` ended in a traceback, exit 1.
    ledger = Ledger.open(tmp_path)
    for rid in ("a", "b", "c"):
        assert accept(ledger, rid)
    polars_loses_enospc(lambda path: path.parent.name == "responses")
    ledger.close()
    assert ledger.disk_full is not None
    assert str(ledger.disk_full).startswith(f"disk full: no space left for {tmp_path} ")
    assert read_pid(tmp_path) is None  # the close went to its end
    assert list_segments(tmp_path / "journal") != []  # the answers wait there for a resume
    left = [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert left == []
    monkeypatch.undo()  # the space is back
    with Ledger.open(tmp_path) as resumed:
        assert not accept(resumed, "a", 2)
        assert accept(resumed, "d")
    assert sorted(scan_responses(tmp_path).collect()["request_id"]) == ["a", "b", "c", "d"]
    assert list_segments(tmp_path / "journal") == []


def test_an_eio_closing_a_segment_on_a_folder_turned_read_only_is_kept_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ext4's abort fails a segment's last flush with EIO, not EROFS: the ledger's close
    raised it, a traceback over the error that stopped the run."""
    import errno

    import engine.durable
    import engine.journal
    from engine.durable import FolderReadOnly

    ledger = Ledger.open(tmp_path)
    ledger.record_dispatch("r1", 1, "m", "p", T0)

    def refused(self: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(engine.journal.JournalWriter, "close", refused)
    monkeypatch.setattr(engine.durable, "turned_read_only", lambda folder: True)
    ledger.close()
    assert isinstance(ledger.disk_full, FolderReadOnly)
