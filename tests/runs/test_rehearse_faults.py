"""`dutchbook run SPEC --rehearse --faults PROFILE` (issue 9): a rehearsal with faults injected,
whose retries by cause reconcile with what the simulator says it injected."""

from __future__ import annotations

import asyncio
import http.server
import io
import re
import threading
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from engine.audit import audit
from providers.sim.faults import INTENDED_OUTCOME, FaultKind
from runs.cli import app
from runs.pipeline import run_campaign
from tests.ports import free_port

# Faults follow arrival order, so which request draws which is chance; the default budgets
# (3 answer failures, 8 attempts) left one of the 112 requests unanswered in about 3% of
# runs (0.05**3 per request for the malformed replies alone). 8 and 12: about 3e-5.
SPEC = """
name = "faulty"
seed = 9
max_attempts = 12
max_answer_failures = 8
[data]
stock_days = 2
[[models]]
name = "workhorse"
provider = "groq"
model = "openai/gpt-oss-120b"
[[models]]
name = "claude"
provider = "bedrock"
model = "anthropic.claude-sonnet-4-5"
[[arms]]
name = "baseline"
passes = 2
"""
FAULTS = "rate_limit=0.1,server_error=0.08,connection_reset=0.05,malformed_json=0.05"


def test_a_rehearsal_with_faults_reconciles_retries_with_the_faults_injected(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    console = Console(file=io.StringIO(), width=200)
    result = asyncio.run(
        run_campaign(spec, tmp_path / "out", rehearse=True, faults=FAULTS, console=console,
                     progress=False)
    )  # fmt: skip
    assert result.summary.complete
    injected = result.injected_faults
    assert sum(injected.values()) >= 5, injected
    expected: Counter[str] = Counter()
    for kind, n in injected.items():
        expected[INTENDED_OUTCOME[FaultKind(kind)].value] += n
    retries = audit(tmp_path / "out").totals.retries_by_cause
    assert {cause: n for cause, n in retries.items() if n} == dict(expected)
    assert "simulator injected" in console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("args", "injects"), [([], True), (["--faults", "none"], False)])
def test_faults_none_turns_the_specs_own_off(
    tmp_path: Path, args: list[str], injects: bool
) -> None:
    """`--faults none` was taken for "not given": the spec's `sim_faults` were injected all
    the same, and nothing on the command line turned them off."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        "name = \"own\"\nseed = 4\nsim_faults = \"server_error=0.3\"\n[data]\nstock_days = 2\n"
        "[[models]]\nname = \"m\"\nprovider = \"sim\"\nmodel = \"sim-coherent\"\n"
        "[[arms]]\nname = \"baseline\"\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 0, result.output
    assert ("simulator injected" in result.output) is injects, result.output
    retries = audit(tmp_path / "out").totals.retry_attempts
    assert (retries > 0) is injects


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rehearse", "--faults", "bogus"], "unknown fault profile 'bogus'; known:"),
        (["--rehearse", "--faults", "flakey"], "profile 'flakey'; did you mean flaky?"),
        # difflib weighs case as any letter: "FLAKY" was told no nearest name
        (["--rehearse", "--faults", "FLAKY"], "profile 'FLAKY'; did you mean flaky? known:"),
        # a kind alone was an unknown profile, with no word that kinds take =RATE
        (["--rehearse", "--faults", "rate_limit"], "'rate_limit' is a fault kind, whose rate "
         "is the fraction of requests it strikes: give it as rate_limit=RATE (0.05); only a "
         "profile name stands alone"),
        (["--rehearse", "--faults", "slow_delay_s"], "give it as slow_delay_s=SECONDS (5)"),
        # told "did you mean flaky?", which then failed: a profile may only lead the list;
        # no nearest kind, so no hint between the name and "known"
        (["--rehearse", "--faults", "light,flakey"], "unknown fault kind 'flakey'; known: "
         "rate_limit, "),
        (["--rehearse", "--faults", "light,slow"], "give it as slow=RATE (0.05)"),
        (["--faults", "flaky"], "add --rehearse"),
        (["--rehearse", "--sim-url", "http://example.com:80"], "a simulator on this machine"),
    ],
)
def test_fault_options_are_checked_before_anything_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), *args])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and message in said, result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("given", "said"),
    [(" flaky", "flaky"), ("light, slow=0.1,", "light,slow=0.1"), (" none", "none")],
)
def test_the_faults_a_rehearsal_injects_are_said_as_parsed(
    tmp_path: Path, given: str, said: str
) -> None:
    """`--faults " flaky"` was taken and printed "( flaky)" in the line of the faults the
    simulator injected: the run says them as parsed, as `serve-sim` does."""
    from runs.pipeline import simulator_faults
    from runs.spec import load_spec

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    assert simulator_faults(load_spec(spec), True, given, None) == said


class _NotTheSimulator(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the standard library's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def test_a_sim_url_where_no_simulator_answers_is_refused_before_planning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, the run planned the campaign, stopped every lane on its first connection error
    # and wrote a report of nothing (exit 4).
    import runs.pipeline

    def no_planning(*args: object, **kwargs: object) -> None:
        raise AssertionError("planned a rehearsal with no simulator to answer it")

    monkeypatch.setattr(runs.pipeline, "_estimate", no_planning)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    out = tmp_path / "out"
    dead = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--rehearse",
                                      "--sim-url", dead])
    assert result.exit_code == 2, result.output
    assert f"error: --sim-url: nothing answers at {dead} (Connection refused); start " \
        "`dutchbook serve-sim` there first" in result.output
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotTheSimulator)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        other = f"http://127.0.0.1:{server.server_address[1]}"
        result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--rehearse",
                                          "--sim-url", other])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 2, result.output
    assert f"error: --sim-url: {other} answers, but not as dutchbook's simulator" in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("timeout_s", "said", "retried"),
    [(120, "shorter than every timeout_s: no retry follows", False),
     (0.2, "past timeout_s: retried as a timeout", True)],
)
def test_slow_faults_are_said_as_the_delay_they_are(
    tmp_path: Path, timeout_s: float, said: str, retried: bool
) -> None:
    """`--faults flaky` said "simulator injected 324 faults (... slow 10 ...)" and then "314
    retry attempts": a slow fault is a delay, a retry only where it outlasts the timeout."""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        "name = \"slow\"\nseed = 4\n[data]\nstock_days = 2\n[[models]]\nname = \"m\"\n"
        f"provider = \"sim\"\nmodel = \"sim-coherent\"\ntimeout_s = {timeout_s}\n"
        "[[arms]]\nname = \"baseline\"\n",
        encoding="utf-8",
    )
    faults = "slow=0.3,slow_delay_s=0.5"
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--faults", faults])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("simulator injected"))
    slow = rf"slow \1 \(a 0\.5 s delay, {said}\)"
    whole = rf"simulator injected (\d+) faults \({re.escape(faults)}\): {slow}"
    assert re.fullmatch(whole, line), line
    assert (audit(out).totals.retry_attempts > 0) is retried
