"""The guard against scoring a folder whose answers are gone with their replies
(`runs.scored_from.gone_shards`, `runs.lost_answers`), against the ways a tester got past
it: a reparse that read nothing, a shard pair of another run copied over the folder's own,
the record deleted beside the shards, and a reparse older than the record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from runs.scored_from import gone_shards
from tests.runs.quiet_campaign import invoke, retried_spec, run_quietly

SPEC = retried_spec("guard", 4)
_SCORED = ("forecasts.parquet", "scores.parquet", "averaged.parquet")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("guard")
    run_quietly(root, "guard", SPEC)
    return root


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    return tmp_path / "run"


def _kept(run_dir: Path) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes() for name in _SCORED}


def _delete(run_dir: Path, *kinds: str) -> None:
    for kind in kinds:
        for shard in (run_dir / kind).glob("*.parquet"):
            shard.unlink()


def test_a_reparse_of_answers_gone_with_their_replies_is_refused(run_dir: Path) -> None:
    """A reparse of a folder whose shards were deleted with their attempts said "accepted 0
    -> 0", exit 0, and wrote a shard and a reparses.jsonl line, which `score` then took for
    the ones gone: "scored 0 answered sets" over the run's forecasts, the only copy left."""
    _delete(run_dir, "responses", "attempts")
    kept = _kept(run_dir)
    code, said = invoke("reparse", str(run_dir), "--parser", "lenient")
    assert code == 2, said
    assert said == (
        f"error: {run_dir}: answers it was scored from are gone from responses/ "
        "(part-00000001.parquet, named in scored-from.json) and no reparse replaced them; a "
        "reparse cannot rebuild them, so nothing was replaced: restore responses/ (and "
        "attempts/) from a backup of the folder, then reparse again\n"
    )
    assert not list((run_dir / "responses").iterdir())
    assert not (run_dir / "logs" / "reparses.jsonl").exists()
    assert invoke("score", str(run_dir))[0] == 2
    assert _kept(run_dir) == kept


def test_a_reparse_without_the_attempts_is_refused(run_dir: Path) -> None:
    """With attempts/ deleted and responses/ kept, a reparse rebuilt the answers from their
    own rows: a strict one of this lenient run dropped every answer strict rejects, with
    the only copy of its reply."""
    _delete(run_dir, "attempts")
    shard = (run_dir / "responses" / "part-00000001.parquet").read_bytes()
    code, said = invoke("reparse", str(run_dir), "--parser", "strict")
    answers = pl.read_parquet(run_dir / "responses" / "part-00000001.parquet").height
    assert code == 2 and said == (
        f"error: {run_dir}: {answers} answers in responses/ have no attempt in attempts/ "
        "(deleted or replaced), so a reparse could not read their replies and would drop "
        "those its parser rejects; nothing was replaced: restore responses/ (and attempts/) "
        "from a backup of the folder, then reparse again\n"
    ), said
    assert (run_dir / "responses" / "part-00000001.parquet").read_bytes() == shard


def test_a_reparse_before_an_earlier_build_accounts_for_nothing(run_dir: Path) -> None:
    """A reparse line an earlier build wrote where it read nothing, after the record, and
    the shard it wrote, vouch for no shard gone."""
    _delete(run_dir, "responses", "attempts")
    pl.read_parquet(run_dir / "forecasts.parquet").clear().write_parquet(
        run_dir / "responses" / "part-00000002.parquet"
    )
    at = json.loads((run_dir / "scored-from.json").read_text())["at"]
    line = {"at": at, "parser": "lenient", "requests_with_replies": 0, "accepted_before": 0}
    (run_dir / "logs" / "reparses.jsonl").write_text(json.dumps(line) + "\n")
    assert gone_shards(run_dir) == {"scored-from.json": ["part-00000001.parquet"]}
