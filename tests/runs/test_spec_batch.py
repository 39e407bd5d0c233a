"""The batch dispatch spec keys (issue 13): `dispatch`, `batch_bucket`, `batch_role_arn`,
`batch_fallback`, each refused in one line naming the key when wrong, and operational on
resume (a run may switch between live and batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.design import spec_changes
from runs.spec import SpecError, check_batch_floor, load_spec

ARMS = {"baseline"}
SPEC = """
name = "demo"
seed = 3

[[models]]
name = "a"
provider = "bedrock"
model = "m"
{extra}

[[arms]]
name = "baseline"
"""


def _load(tmp_path: Path, extra: str) -> object:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(extra=extra))
    return load_spec(path, arm_names=ARMS)


def test_batch_keys_reach_the_model_config(tmp_path: Path) -> None:
    spec = _load(tmp_path, 'dispatch = "batch"\nbatch_bucket = "s3://b/runs"\n'
                 'batch_role_arn = "arn:aws:iam::123456789012:role/batch"\n'
                 'batch_fallback = "live"')
    model = spec.model("a")  # type: ignore[attr-defined]
    assert model.dispatch == "batch" and model.batch_bucket == "s3://b/runs"
    assert model.batch_role_arn == "arn:aws:iam::123456789012:role/batch"
    assert model.batch_fallback_live is True
    assert not set(model.extra) & {"dispatch", "batch_fallback"}
    plain = _load(tmp_path, "").model("a")  # type: ignore[attr-defined]
    assert (plain.dispatch, plain.batch_fallback_live, plain.batch_bucket) == ("live", False, None)
    small = _load(tmp_path, "batch_max_lines = 50\nbatch_max_jobs = 2").model("a")  # type: ignore[attr-defined]
    assert (small.extra["batch_max_lines"], small.extra["batch_max_jobs"]) == (50, 2)
    batch_fallback = _load(tmp_path, 'dispatch = "batch"\nbatch_fallback = "batch"').model("a")  # type: ignore[attr-defined]
    assert batch_fallback.batch_fallback_live is False


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ('dispatch = "bulk"', "dispatch", "'live' or 'batch', not 'bulk'"),
        ("dispatch = true", "dispatch", "'live' (one request per query) or 'batch'"),
        ('batch_fallback = "retry"', "batch_fallback", "'live' or 'batch', not 'retry'"),
        ('batch_bucket = "my-bucket"', "batch_bucket", "s3://bucket/prefix or gs://"),
        ('batch_bucket = "s3://"', "batch_bucket", "s3://bucket/prefix"),
        ('batch_role_arn = "role/batch"', "batch_role_arn", "IAM role ARN"),
        ("batch_max_lines = 0", "batch_max_lines", "an integer >= 1"),
        ('batch_max_jobs = "2"', "batch_max_jobs", "an integer >= 1"),
    ],
)
def test_bad_batch_keys_are_named(tmp_path: Path, extra: str, key: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        _load(tmp_path, extra)
    assert info.value.key == f"models[0].{key}"
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_batch_keys_may_change_on_resume() -> None:
    old = '[[models]]\nname = "x"\nmodel = "a"\n'
    new = old + ('dispatch = "batch"\nbatch_bucket = "gs://b/p"\nbatch_fallback = "live"\n'
                 "batch_max_lines = 9\n")
    keys = ["batch_bucket", "batch_fallback", "batch_max_lines", "dispatch"]
    assert spec_changes(old, new) == ([], [f"models[x].{k}" for k in keys])


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ("batch_max_lines = 100", "101 queries, say, cannot be cut into jobs of 100 lines: the"),
        ("batch_max_lines = 198", "199 queries, say, cannot be cut into jobs of 100 to 198"),
        ("batch_max_lines = 50", "no job of at most 50 lines reaches it"),
        ("batch_max_lines = 199", None),
        ("batch_max_lines = 60000", None),  # above bedrock's own cap: its cap
        ("", None),
    ],
)
def test_a_bedrock_batch_cap_that_strands_a_remainder_is_refused(
    tmp_path: Path, extra: str, refused: str | None
) -> None:
    """`batch_max_lines = 100` cut a tester's 224 Bedrock queries 100 + 100 and left 24 below
    Bedrock's minimum of 100 lines per job, waiting through every resume; `plan` said
    nothing and the run said so only at its end."""
    spec = _load(tmp_path, 'dispatch = "batch"\n' + extra)
    if refused is None:
        check_batch_floor(spec)  # type: ignore[arg-type]
        return
    with pytest.raises(SpecError) as info:
        check_batch_floor(spec)  # type: ignore[arg-type]
    assert info.value.key == "models[0].batch_max_lines"
    assert "at least 199 (or left out) for a bedrock batch model" in str(info.value)
    assert refused in str(info.value) and "\n" not in str(info.value)
    live = _load(tmp_path, extra)  # a live model's cap cuts nothing
    check_batch_floor(live)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("extra", "left", "refused"),
    [
        ("batch_max_lines = 100", 200, None),  # 100 + 100
        ("batch_max_lines = 100", 300, None),
        ("batch_max_lines = 100", 224, "224 queries its folder has left to ask cannot be cut "
                                       "into jobs of 100 lines: 24 would wait for ever"),
        ("batch_max_lines = 150", 180, "180 queries its folder has left to ask cannot be cut "
                                       "into jobs of 100 to 150 lines: 30 would wait"),
        ("batch_max_lines = 150", 250, None),  # 150 + 100
        ("batch_max_lines = 100", 42, None),  # below the floor whatever the cap
        ("batch_max_lines = 100", 0, None),
        ("batch_max_lines = 50", 150, "no job of at most 50 lines reaches it"),
    ],
)
def test_a_resume_is_held_to_the_queries_it_has_left(
    tmp_path: Path, extra: str, left: int, refused: str | None
) -> None:
    """A resume knows its count: a cap below 199 that cuts it cleanly is taken."""
    spec = _load(tmp_path, 'dispatch = "batch"\n' + extra)
    if refused is None:
        check_batch_floor(spec, {"a": left})  # type: ignore[arg-type]
    else:
        with pytest.raises(SpecError) as info:
            check_batch_floor(spec, {"a": left})  # type: ignore[arg-type]
        assert refused in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(SpecError):  # a model whose count is not given: every count
        check_batch_floor(spec, {"b": 200})  # type: ignore[arg-type]


def test_plan_and_run_refuse_a_stranding_bedrock_cap_before_anything_is_written(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from runs.cli import app

    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(extra='dispatch = "batch"\nbatch_max_lines = 100\n'))
    for args in (["plan", str(path)], ["run", str(path), "--out", str(tmp_path / "out")]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert "models[0].batch_max_lines: at least 199" in said, said
    assert not (tmp_path / "out").exists()
