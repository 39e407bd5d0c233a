"""`engine.lanefile.LaneFileWriter`'s warning of a `logs/lanes.json` it could not write: it
named the time of the failure as the one `status` shows the lanes "as of" (16:22:47, where
`status` showed the file's last successful write, 16:22:46), and promised a time `status`
says only once the file is 10 s behind the run's last attempt."""

from __future__ import annotations

import errno
import io
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

import engine.lanefile
from engine.durable import write_bytes_atomic
from engine.lanefile import LANES_FILE, LaneFileWriter
from engine.lanes import LaneStats
from engine.logs import EngineLog

#: The clock's readings, a second apart: the write that succeeds, then the one refused.
WRITTEN = datetime(2026, 12, 7, 16, 22, 46, 900_000, tzinfo=UTC)
REFUSED = datetime(2026, 12, 7, 16, 22, 47, 100_000, tzinfo=UTC)


class _Clock(datetime):
    """`datetime` whose `now` reads `_Clock.at`."""

    at: datetime = WRITTEN

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return cls.at


def _refusing(monkeypatch: pytest.MonkeyPatch, refused: list[bool], at: datetime) -> None:
    """`logs/` refuses writes (EACCES: not this user's) while `refused[0]`; the clock reads
    `at` until a test moves it."""

    def write(target: Path, data: bytes, **kwargs: Any) -> None:
        if refused[0]:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(target))
        write_bytes_atomic(target, data, **kwargs)

    monkeypatch.setattr(engine.lanefile, "write_bytes_atomic", write)
    monkeypatch.setattr(engine.lanefile, "datetime", _Clock)
    monkeypatch.setattr(_Clock, "at", at)


def test_the_warning_quotes_the_last_write_status_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = [False]
    _refusing(monkeypatch, refused, WRITTEN)
    console = io.StringIO()
    writer = LaneFileWriter(tmp_path, EngineLog(None, console=console))
    lanes = [LaneStats("alpha", "sim")]
    writer.write(lanes)
    refused[0], _Clock.at = True, REFUSED
    writer.write(lanes)
    said = console.getvalue()
    written = orjson.loads((tmp_path / LANES_FILE).read_bytes())["updated_at"]
    assert datetime.fromisoformat(written).strftime("%H:%M:%S") == "16:22:46", written
    assert "`dutchbook status` may show the lanes as of 16:22:46 UTC" in said, said
    assert "16:22:47" not in said, said


def test_a_dispatch_that_wrote_no_lanes_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refusing(monkeypatch, [True], REFUSED)
    console = io.StringIO()
    LaneFileWriter(tmp_path, EngineLog(None, console=console)).write([LaneStats("alpha", "sim")])
    said = console.getvalue()
    assert "could not be written" in said, said
    assert "may show the lanes an earlier run left (this one wrote none), or none" in said, said
    assert "as of" not in said, said
