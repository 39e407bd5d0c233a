"""A simulated forecaster is labelled as one wherever the report shows it: a spec may name
sim-coherent "GPT-OSS-120B", and figure 2, leaderboard.txt, the CSVs, summary.json and the
terminal showed it as that model with nothing saying it was simulated."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from rich.console import Console

from runs.report import write_report
from runs.scoring_step import SCORE_SCHEMA

SPEC = """name = "labels"
seed = 1
[[models]]
name = "GPT-OSS-120B"
provider = "sim"
model = "sim-coherent"
[[models]]
name = "Mistral Small 3.2"
provider = "sim"
model = "sim-noisy"
[[models]]
name = "real-one"
provider = "openai"
model = "gpt-x"
"""
MODELS = {"GPT-OSS-120B": 0.0, "Mistral Small 3.2": 0.01, "real-one": 0.02}
NOTE = "Simulated forecasters: GPT-OSS-120B, Mistral Small 3.2 (answered by the local simulator"


def _scores() -> pl.DataFrame:
    units = [f"2025-01-0{d}:{s}" for d in (1, 2, 3) for s in ("AAA", "BBB")]
    rows = [
        {"model": m, "arm": "baseline", "unit": u, "pass": 0, "set": "h1",
         "cluster": u.split(":")[0], "norm": "inf", "profit": 0.001 * i + shift,
         "coverage": 1.0, "events": ["A", "notA"], "stakes": [], "coherent": [],
         "brier": 0.2 + shift, "answered": 2}
        for m, shift in MODELS.items()
        for i, u in enumerate(units)
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=SCORE_SCHEMA)


def _report(run: Path, **kw: Any) -> tuple[dict[str, Any], str]:
    run.mkdir(exist_ok=True)
    (run / "spec.toml").write_text(SPEC, encoding="utf-8")
    out = StringIO()
    console = Console(file=out, width=200, color_system=None)
    kw.setdefault("figures", False)
    summary = write_report(run, _scores(), floor=0.9, seed=3, reps=200, console=console, **kw)
    return summary, out.getvalue()


def test_summary_json_says_each_models_provider_and_whether_it_is_simulated(
    tmp_path: Path,
) -> None:
    _report(tmp_path)
    on_disk = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert on_disk["models"]["GPT-OSS-120B"] == {
        "coverage": pytest.approx(1.0), "provider": "sim", "simulated": True,
        "simulator_replies": None,  # no attempt in this folder named a model
    }  # fmt: skip
    assert on_disk["models"]["real-one"]["provider"] == "openai"
    assert on_disk["models"]["real-one"]["simulated"] is False


def test_the_leaderboards_and_the_terminal_name_the_simulated_forecasters(tmp_path: Path) -> None:
    _, printed = _report(tmp_path)
    report = tmp_path / "report"
    files = [(report / name).read_text() for name in ("leaderboard.txt", "report.md")]
    for text in (printed, *files):
        assert NOTE in " ".join(text.split())  # the terminal may wrap it
    # Said under the leaderboard, before what follows it.
    board = (report / "leaderboard.txt").read_text()
    assert board.index(NOTE) < board.index("Across models")
    assert "real-one" not in printed.split("Simulated forecasters:")[1].splitlines()[0]


def test_every_csv_with_a_model_column_ends_in_simulated(tmp_path: Path) -> None:
    _report(tmp_path)
    report = tmp_path / "report"
    for name in ("leaderboard.csv", "models.csv", "families.csv"):
        table = pl.read_csv(report / name, infer_schema_length=0)
        assert table.columns[-1] == "simulated", name
        for model, flag in table.select("model", "simulated").iter_rows():
            assert flag == ("false" if model == "real-one" else "true")
    assert pl.read_csv(report / "models.csv")["provider"].to_list() == ["sim", "sim", "openai"]


def _answered(run: Path, named: dict[str, str]) -> None:
    """One accepted attempt of each model, its reply naming the model `named` gives it."""
    from engine.ledger import Ledger
    from engine.records import AttemptRecord, ResponseRecord

    at = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)
    providers = {"real-one": "openai"}
    with Ledger.open(run) as ledger:
        for model, reported in named.items():
            attempt = AttemptRecord(
                request_id=f"{model}-0", attempt=1, model=model,
                provider=providers.get(model, "sim"), started_at=at, elapsed_ms=5.0,
                outcome="ok", http_status=200, provider_request_id=None, retry_after_s=None,
                tokens_in=50, tokens_out=5, detail="", model_reported=reported,
            )
            response = ResponseRecord(
                request_id=f"{model}-0", model=model, arm="baseline", unit="u", pass_=0,
                events=["e"], keys=["probability"], raw_text='{"probability": 0.5}',
                values=[0.5], finish_reason="stop", tokens_in=50, tokens_out=5, attempts=1,
                accepted_at=at,
            )
            ledger.record_result(attempt, response)


@pytest.mark.parametrize("real_reply", ["gpt-x", "sim/coherent"])
def test_the_audit_csv_ends_in_simulated_on_each_models_row(
    tmp_path: Path, real_reply: str
) -> None:
    """audit.csv's per-model rows carried no label where every other CSV naming a model
    ended in `simulated`: a real model's reply naming the simulator makes it simulated there
    too, as in summary.json."""
    _answered(tmp_path, {"GPT-OSS-120B": "sim/coherent", "real-one": real_reply})
    summary, _ = _report(tmp_path)
    table = pl.read_csv(tmp_path / "report" / "audit.csv", infer_schema_length=0)
    assert table.columns[-1] == "simulated"
    cells = {(s, n): f for s, n, f in table.select("scope", "name", "simulated").iter_rows()}
    said = {m: "true" if entry["simulated"] else "false" for m, entry in summary["models"].items()}
    assert said["real-one"] == ("true" if real_reply.startswith("sim/") else "false")
    assert {n: f for (s, n), f in cells.items() if s == "model"} == {
        "GPT-OSS-120B": "true", "real-one": said["real-one"],
    }  # fmt: skip
    assert [f for (s, _), f in cells.items() if s != "model"] == [None] * 3  # sim, openai, all


def test_every_figure_names_the_simulated_forecasters_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    texts: dict[str, list[str]] = {}
    save = Figure.savefig

    def recording(fig: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        texts[str(len(texts))] = [t.get_text() for t in fig.texts]
        return save(fig, target, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording)
    summary, _ = _report(tmp_path, figures=True)
    assert summary["figures"]["leaderboard"] is not None
    assert texts  # figure 2 at least
    for drawn in texts.values():
        assert any(t.startswith(NOTE) for t in drawn), drawn


def test_the_page_names_them_under_its_leaderboard(tmp_path: Path) -> None:
    from runs.report_page import write_page

    _report(tmp_path)
    page = write_page(tmp_path).read_text(encoding="utf-8")
    board = page[page.index("<h2>Leaderboard</h2>") :]
    assert NOTE in board[: board.index("<h2>", 5)]
