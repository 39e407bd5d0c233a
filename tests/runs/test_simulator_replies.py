"""A spec's real model answered by the local simulator (its `base_url` pointed at `serve-sim`,
for a whole run or for a resume) is labelled simulated by every view of the report, in part
with counts where another server answered the rest, and `run` and `status` say that its
replies named more than one model: a tester's folder of 8 real Gemma answers resumed against
`serve-sim` reported "Gemma 3 270M, ...: a real model's real answers" of 50 simulated ones."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from providers.sim.server import start_sim
from runs.cli import app
from tests.json_replies import send_json

#: What the other server's replies name as the model answering (a llama-cpp-python's).
REAL = "gemma-3-270m"

#: A real model's spec, its `about` line true only of its own answers (as runs/specs/local.toml).
SPEC = """
name = "mixed"
seed = 2
[data]
stock_days = 2
[[models]]
name = "gemma"
about = "served on this machine: a real model's real answers"
provider = "openai"
model = "gemma-3-270m"
base_url = "http://127.0.0.1:9/v1"
base_url_env = "DUTCHBOOK_TEST_MIXED_URL"
[[arms]]
name = "baseline"
"""


def _other_server(upstream: str, answers: int) -> http.server.ThreadingHTTPServer:
    """Another OpenAI-compatible server: the simulator's answers under the name `REAL`, then
    401s once `answers` are given (the lane stops; a resume elsewhere finishes the folder)."""
    given, lock = [0], threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the standard library's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status = 401
            reply: dict[str, Any] = {"error": {"message": "no", "type": "invalid_api_key"}}
            with lock:
                answering = given[0] < answers
                given[0] += answering
            if answering:
                asked = urllib.request.Request(
                    upstream + self.path.removeprefix("/v1"), data=body,
                    headers={"Content-Type": "application/json"},
                )  # fmt: skip
                with urllib.request.urlopen(asked) as answered:
                    status, reply = 200, {**json.loads(answered.read()), "model": REAL}
            send_json(self, status, reply)

        def log_message(self, *args: object) -> None:
            pass

    return http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    """(the simulator's openai base_url, the other server's base_url, giving 8 answers)."""
    sim = asyncio.run(start_sim())
    upstream = f"{sim.root_url}/openai/v1"
    other = _other_server(upstream, 8)
    serving = threading.Thread(target=other.serve_forever, daemon=True)
    serving.start()
    try:
        yield upstream, f"http://127.0.0.1:{other.server_address[1]}/v1"
    finally:
        other.shutdown()
        other.server_close()
        asyncio.run(sim.stop())


def _run(root: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    spec = root / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    monkeypatch.setenv("DUTCHBOOK_TEST_MIXED_URL", base_url)
    result = CliRunner().invoke(app, ["run", str(spec), "--out", str(root / "out")])
    return result.output


@pytest.fixture(scope="module")
def mixed(
    servers: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    """A folder of 8 answers from the other server resumed against the simulator, and the
    resume's output."""
    root = tmp_path_factory.mktemp("mixed")
    with pytest.MonkeyPatch.context() as monkeypatch:
        first = _run(root, servers[1], monkeypatch)
        assert "8 answers accepted" in first, first
        resumed = _run(root, servers[0], monkeypatch)
    assert "8 already accepted" in resumed, resumed
    return root / "out", resumed


def _summary_models(out: Path) -> Any:
    return orjson.loads((out / "report" / "summary.json").read_bytes())["models"]


def test_every_view_labels_a_model_the_simulator_answered_in_part(
    mixed: tuple[Path, str],
) -> None:
    out, resumed = mixed
    models = _summary_models(out)
    replies = models["gemma"]["simulator_replies"]
    assert models["gemma"]["simulated"] is True and models["gemma"]["provider"] == "openai"
    assert replies["replies"] > replies["simulator"] > 0
    # The answers the simulator gave, and all the replies naming a model (8 are the other's).
    assert replies["replies"] - replies["simulator"] == 8
    note = (
        f"Simulated forecasters: gemma in part ({replies['simulator']:,} of "
        f"{replies['replies']:,} replies from the local simulator)."
    )
    report = out / "report"
    files = ("leaderboard.txt", "report.md", "index.html")
    for view in (resumed, *((report / name).read_text("utf-8") for name in files)):
        assert note in " ".join(view.split())
    assert "gemma,1.0,openai,true" in (report / "models.csv").read_text("utf-8")


def test_the_specs_about_line_is_not_said_unqualified(mixed: tuple[Path, str]) -> None:
    out, _ = mixed
    replies = _summary_models(out)["gemma"]["simulator_replies"]
    text = (out / "report" / "report.md").read_text("utf-8")
    said = (
        f"- **gemma**: {replies['simulator']:,} of {replies['replies']:,} replies named the "
        "local simulator (sim/"
    )
    assert said in text
    line = next(line for line in text.splitlines() if line.startswith("- **gemma**"))
    assert line.endswith("not the model its spec describes as: served on this machine: a real "
                         "model's real answers")
    assert "- **gemma**: served on this machine" not in text
    page = (out / "report" / "index.html").read_text("utf-8")
    assert "<strong>gemma:</strong> served on this machine" not in page


def test_run_and_status_say_the_replies_named_two_models(mixed: tuple[Path, str]) -> None:
    out, resumed = mixed
    said = "gemma: its replies named 2 models as the one answering (sim/"
    assert said in " ".join(resumed.split())
    status = CliRunner().invoke(app, ["status", str(out)])
    assert status.exit_code == 0, status.output
    assert said in " ".join(status.output.split())
    as_json = orjson.loads(CliRunner().invoke(app, ["status", str(out), "--json"]).output)
    simulator = _summary_models(out)["gemma"]["simulator_replies"]["simulator"]
    # The simulator names the personality the spec's id hashes to: whichever, one name.
    named = as_json["models_reported"]["gemma"]
    assert named.pop(REAL) == 8 and list(named.values()) == [simulator]
    assert next(iter(named)).startswith("sim/")


def test_a_real_models_folder_answered_only_by_the_simulator_reads_simulated(
    servers: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resumed = _run(tmp_path, servers[0], monkeypatch)
    out = tmp_path / "out"
    assert _summary_models(out)["gemma"]["simulated"] is True
    assert "Simulated forecasters: gemma (answered by the local simulator, not real models)." in (
        " ".join(resumed.split())
    )
    text = (out / "report" / "report.md").read_text("utf-8")
    assert "- **gemma**: served on this machine" not in text
    # One model named: nothing said of a second.
    assert "replies named 2 models" not in resumed
