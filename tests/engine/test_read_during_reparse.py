"""`status` and `audit` read while a `reparse` replaces the answers' shards.

They list the shards, then read them at `collect`; a reparse in between deleted the shard
just listed, and both ended in "No such file or directory" (`dutchbook audit` beside a
reparse failed 7 times in 60). They now read the folder again (`engine.scan.read_settled`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import engine.audit
import engine.status
from engine.audit import audit
from engine.reparse import reparse
from engine.status import status
from tests.engine.test_reparse import _strict_run


def _reparsed_after_listing(
    module: Any, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """The module's `scan_ledger`, followed the first time by a reparse that replaces the
    shards it has just listed, before anything reads them; returns the calls made."""
    real: Callable[..., Any] = module.scan_ledger
    calls: list[int] = []

    def listed_then_replaced(*args: Any, **kwargs: Any) -> Any:
        frames = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            reparse(run_dir, "lenient")
        return frames

    monkeypatch.setattr(module, "scan_ledger", listed_then_replaced)
    return calls


@pytest.mark.parametrize(
    ("module", "accepted"),
    [
        (engine.status, lambda run_dir: status(run_dir)["accepted"]),
        (engine.audit, lambda run_dir: audit(run_dir).totals.accepted),
    ],
    ids=["status", "audit"],
)
def test_a_reader_reads_again_when_a_reparse_replaced_the_shards_it_listed(
    module: Any, accepted: Callable[[Path], int], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _strict_run(tmp_path)
    calls = _reparsed_after_listing(module, tmp_path, monkeypatch)
    assert accepted(tmp_path) == 5  # lenient's answers: read after the replacement
    assert len(calls) == 2


def test_a_folder_changing_at_every_read_is_said_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reparses back to back beside an audit (51 of 71 reads) ended in polars' bare "No such
    file or directory" for a shard, which reads as a damaged folder."""
    from engine.scan import SETTLE_TRIES
    from engine.scan import scan_ledger as real

    _strict_run(tmp_path)
    parsers = iter(["lenient", "strict"] * SETTLE_TRIES)

    def replaced_after_every_listing(*args: Any, **kwargs: Any) -> Any:
        frames = real(*args, **kwargs)
        reparse(tmp_path, next(parsers))
        return frames

    monkeypatch.setattr(engine.status, "scan_ledger", replaced_after_every_listing)
    with pytest.raises(FileNotFoundError, match=f"changed {SETTLE_TRIES} times while they were"):
        status(tmp_path)
