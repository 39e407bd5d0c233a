"""When the simulator's faults (`sim_faults`, `--faults`) change a run's answers, as
docs/interfaces.md says: faults that trigger no answer retry change none; an answer failure
(`refusal`, `output_cap`) re-asks its request with a new seed, which a noisy model answers
otherwise. The docs said "changes no answer", and a tester's resumed `flaky` run differed
from an uninterrupted one in 13 of 31,560 answers, each re-asked after a refusal or a
truncation."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from engine.scan import scan_attempts, scan_responses
from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC

#: A model whose reply depends on the seed (`sim-coherent`'s does not), each request allowed
#: as many answer failures as attempts (at these rates, one of 28 spent the default 3).
NOISY = "max_answer_failures = 8\n" + SMALL_SPEC.replace(
    'model = "sim-coherent"', 'model = "sim-noisy"'
)


def _answers(tmp_path: Path, faults: str) -> tuple[dict[str, str], set[str], int]:
    """The run's replies by request, the requests re-asked with a new seed, and how many
    attempts it made."""
    spec = tmp_path / "spec.toml"
    spec.write_text(NOISY, encoding="utf-8")
    out = tmp_path / faults.replace("=", "-").replace(",", "_")
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--faults", faults])
    assert result.exit_code == 0, result.output
    replies = scan_responses(out).collect().select("request_id", "raw_text").rows()
    attempts = scan_attempts(out).collect()
    seeded = attempts.filter(pl.col("detail").str.contains("retry with seed", literal=True))
    return dict(replies), set(seeded["request_id"]), attempts.height


def test_only_answer_retries_change_a_noisy_models_answers(tmp_path: Path) -> None:
    clean, none_seeded, asked = _answers(tmp_path, "none")
    assert none_seeded == set() and asked == len(clean)
    transport, seeded, asked = _answers(
        tmp_path, "rate_limit_bare=0.1,server_error=0.1,connection_reset=0.05,"
        "truncated_body=0.05,malformed_json=0.1,missing_routing=0.05",
    )  # fmt: skip
    assert asked > len(clean)  # faults were injected, and re-asked as they were
    assert seeded == set() and transport == clean
    refused, seeded, _ = _answers(tmp_path, "refusal=0.2,output_cap=0.2")
    assert seeded and refused.keys() == clean.keys()
    assert {rid for rid in clean if refused[rid] != clean[rid]} == seeded
