"""A rehearsal in batch mode through the OpenAI-shaped batch APIs (issue 13): Groq, DeepInfra
and Azure models with `dispatch = "batch"`, the simulator injecting batch faults, the whole
pipeline (engine batch lanes, our batch clients, the simulator's files and batches) end to
end. Every query is accepted once, and the retries by cause reconcile with what the
simulator counted: rate-limited lines as rate limits, error lines as provider errors, the
lines an expired job never ran as timeouts, and no input uploaded or job created twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runs.batch_rehearsal import rehearse_batch

# A line retried alone in a job that expires is not run (an expired job runs the first half
# of its lines), about a third of its tries; 8 attempts left one unanswered in about 2.5e-3
# of runs (simulated), 16 in about 3e-7.
SPEC = """
name = "batchy"
seed = 9
max_attempts = 16
[data]
stock_days = 2
[[models]]
name = "workhorse"
provider = "groq"
model = "openai/gpt-oss-120b"
dispatch = "batch"
batch_max_lines = 10
[[models]]
name = "qwen"
provider = "deepinfra"
model = "Qwen/Qwen3-32B"
dispatch = "batch"
batch_max_lines = 10
[[models]]
name = "luna"
provider = "azure"
model = "gpt-5.6-luna"
api_version = "2024-10-21"
dispatch = "batch"
batch_max_lines = 10
[[arms]]
name = "baseline"
"""
FAULTS = ("batch_seconds=0.3,batch_expire=0.25,batch_create_delay=0.4,"
          "batch_create_delay_s=0.2,batch_line_error=0.05,rate_limit=0.05")


def test_a_batch_rehearsal_reconciles_with_the_batch_faults_injected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts, totals = rehearse_batch(tmp_path, monkeypatch, SPEC, FAULTS)
    assert totals.accepted == totals.requests == 84
    for kind in ("batch_expire", "batch_line_error", "rate_limit", "batch_create_delay"):
        assert counts.get(f"fault.{kind}", 0) >= 1, (kind, counts)
    causes = {cause: n for cause, n in totals.retries_by_cause.items() if n}
    assert causes == {
        "rate_limit": counts["fault.rate_limit"],
        "provider_error": counts["fault.batch_line_error"],
        "timeout": counts["batch.lines_unrun"],
    }
    assert counts["batch.files_uploaded"] == counts["batch.jobs_created"]
    assert counts["batch.input_files_without_batch"] == 0
    assert counts.get("requests", 0) == 0  # nothing went live
