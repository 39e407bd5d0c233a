"""One batch rehearsal run for the pipeline tests: a spec written out, the whole campaign run
against the in-process simulator with batch faults, polls compressed to 0.1 s."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from engine.audit import AuditRow, audit
from runs.pipeline import run_campaign


def rehearse_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec_text: str, faults: str
) -> tuple[dict[str, Any], AuditRow]:
    """The simulator's counts and the audit's totals of a completed batch rehearsal."""
    monkeypatch.setenv("DUTCHBOOK_BATCH_POLL_S", "0.1")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text, encoding="utf-8")
    console = Console(file=io.StringIO(), width=200)
    result = asyncio.run(run_campaign(spec, tmp_path / "out", rehearse=True, faults=faults,
                                      console=console, progress=False))
    assert result.summary.complete and result.sim_counts is not None
    return dict(result.sim_counts), audit(tmp_path / "out").totals
