"""The model a provider's reply says answered is kept with each attempt (`model_reported`):
a gateway's fallback or an alias resolved to another model was accepted with no trace of
it. Folders written before the column existed stay readable by every command."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from engine.scan import scan_attempts
from engine.shards import list_shards
from runs.cli import app
from tests.runs.run_folders import SMALL_SPEC, FinishedRuns


def test_each_attempt_keeps_the_model_its_reply_named(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    out = finished_runs.finish(tmp_path, SMALL_SPEC)
    attempts = scan_attempts(out, ["outcome", "model_reported"]).collect()
    ok = attempts.filter(pl.col("outcome") == "ok")
    assert ok.height > 0
    # The simulator's replies name its forecaster as it spells it, not the spec's id: what
    # the reply said is kept as said.
    assert ok["model_reported"].to_list() == ["sim/coherent"] * ok.height


def test_a_folder_written_before_the_column_is_read_by_every_command(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    out = finished_runs.finish(tmp_path, SMALL_SPEC)
    old = tmp_path / "old"
    shutil.copytree(out, old)
    shards = [path for _, path in list_shards(old / "attempts")]
    assert shards
    for shard in shards:  # as an earlier version wrote them
        pl.read_parquet(shard).drop("model_reported").write_parquet(shard)
    attempts = scan_attempts(old, ["request_id", "model_reported"]).collect()
    assert attempts.height > 0 and attempts["model_reported"].null_count() == attempts.height
    runner = CliRunner()
    for command in (["status", str(old)], ["audit", str(old)], ["reparse", str(old)],
                    ["score", str(old)], ["report", str(old)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, (command, result.output)
        assert "Traceback" not in result.output
    spec = tmp_path / "spec.toml"
    resumed = runner.invoke(app, ["run", str(spec), "--out", str(old)])
    assert resumed.exit_code == 0, resumed.output
    assert "already accepted" in resumed.output
    # The writer gave the older shards the column: every shard reads alike (the README's
    # plain read), the earlier attempts' null.
    read = pl.scan_parquet(old / "attempts" / "*.parquet").collect()
    assert read["model_reported"].null_count() == read.height == attempts.height


def test_the_audit_says_a_model_answered_by_another(
    finished_runs: FinishedRuns, tmp_path: Path
) -> None:
    """A referee sees, per model, which models its replies named, and a line where more than
    one did (a gateway's fallback answered some queries)."""
    import orjson

    out = finished_runs.finish(tmp_path, SMALL_SPEC)
    runner = CliRunner()
    clean = runner.invoke(app, ["audit", str(out), "--json"])
    assert clean.exit_code == 0, clean.output
    asked = orjson.loads(clean.output)["models_reported"]
    assert list(asked) == ["m"] and list(asked["m"]) == ["sim/coherent"]
    total = asked["m"]["sim/coherent"]
    assert "replies named" not in runner.invoke(app, ["audit", str(out)]).output
    shard = next(path for _, path in list_shards(out / "attempts"))
    frame = pl.read_parquet(shard)
    swapped = pl.int_range(pl.len()) < 3
    frame.with_columns(
        model_reported=pl.when(swapped).then(pl.lit("llama-3.1-8b-instant"))
        .when(pl.int_range(pl.len()) == 3).then(pl.lit("evil\x1b[31mRED\nline"))
        .otherwise(pl.col("model_reported"))
    ).write_parquet(shard)
    named = orjson.loads(runner.invoke(app, ["audit", str(out), "--json"]).output)
    # As the replies named them (JSON escapes them), in name order.
    assert named["models_reported"] == {
        "m": {"evil\x1b[31mRED\nline": 1, "llama-3.1-8b-instant": 3, "sim/coherent": total - 4}
    }
    assert list(named["models_reported"]["m"]) == sorted(named["models_reported"]["m"])
    said = runner.invoke(app, ["audit", str(out)]).output
    assert (
        f"m: its replies named 3 models as the one answering (sim/coherent {total - 4:,}, "
        "llama-3.1-8b-instant 3, evil[31mRED line 1): another model answered some of its queries"
    ) in " ".join(said.split())
    assert "\x1b" not in said  # a reply's escape codes never reach the terminal
