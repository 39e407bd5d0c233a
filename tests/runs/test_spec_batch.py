"""The batch dispatch spec keys (issue 13): `dispatch`, `batch_bucket`, `batch_role_arn`,
`batch_fallback`, each refused in one line naming the key when wrong, and operational on
resume (a run may switch between live and batch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.design import spec_changes
from runs.spec import SpecError, load_spec

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
