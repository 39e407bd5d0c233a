"""A Bedrock batch model's `batch_max_bytes` held to what keeps its jobs at Bedrock's floor
of 100 lines (`runs.spec.check_batch_bytes`, `providers.batch.BatchLimits.least_max_bytes`),
judged by its lines as the sizing client writes them (`runs.batch_bytes`): a cap of 50,000
bytes cut a rehearsal's 224 queries into jobs of 21 lines, each refused at creation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from providers.batch_bedrock import LIMITS, BedrockBatchClient
from providers.types import ChatRequest, ModelConfig
from runs.batch_bytes import sizing_client
from runs.spec import (
    CampaignSpec,
    SpecError,
    byte_capped_batch_models,
    check_batch_bytes,
    load_spec,
)

SPEC = """
name = "demo"
seed = 3

[[models]]
name = "a"
provider = "bedrock"
model = "m"
dispatch = "batch"
{extra}

[[models]]
name = "b"
provider = "groq"
model = "g"
dispatch = "batch"
batch_max_bytes = 10

[[arms]]
name = "baseline"
"""


def _load(tmp_path: Path, extra: str) -> CampaignSpec:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(extra=extra))
    return load_spec(path, arm_names={"baseline"})


def test_the_least_byte_cap_holds_the_longest_lines_a_job_must_hold() -> None:
    floor = replace(LIMITS, max_lines=199)
    sizes = [1000] * 10 + [10] * 300
    assert floor.least_max_bytes(sizes) == 10 * 1001 + 189 * 11  # any 199 of them
    assert floor.least_max_bytes(sizes[:150]) == 10 * 1001 + 140 * 11  # all 150 in one job
    assert replace(floor, max_lines=120).least_max_bytes(sizes) == 10 * 1001 + 110 * 11
    assert floor.least_max_bytes(sizes[:99]) == 0  # below the floor: no job is cut of them
    assert replace(floor, min_lines=1).least_max_bytes(sizes) == 0  # no floor


def test_only_a_floored_providers_lowered_byte_cap_is_sized(tmp_path: Path) -> None:
    assert byte_capped_batch_models(_load(tmp_path, "batch_max_bytes = 50000")) == ["a"]
    assert byte_capped_batch_models(_load(tmp_path, f"batch_max_bytes = {2**30}")) == []
    assert byte_capped_batch_models(_load(tmp_path, "")) == []
    live = _load(tmp_path, "batch_max_bytes = 50000").text.replace(
        'model = "m"\ndispatch = "batch"', 'model = "m"\ndispatch = "live"')
    (tmp_path / "live.toml").write_text(live)
    assert byte_capped_batch_models(load_spec(tmp_path / "live.toml", arm_names={"baseline"})) == []


@pytest.mark.parametrize("left", [False, True])
def test_a_byte_cap_below_the_least_is_refused_in_one_line(tmp_path: Path, left: bool) -> None:
    sizes = [2400] * 20 + [2300] * 204
    least = LIMITS.least_max_bytes(sizes)
    assert least == 20 * 2401 + 179 * 2301
    spec = _load(tmp_path, f"batch_max_bytes = {least}")
    check_batch_bytes(spec, {"a": sizes, "b": [5] * 500}, left=left)  # b: no floor
    check_batch_bytes(_load(tmp_path, ""), {"a": sizes})  # Bedrock's own 1 GB
    check_batch_bytes(_load(tmp_path, "batch_max_bytes = 10"), {"a": sizes[:99]})  # no job
    spec = _load(tmp_path, "batch_max_bytes = 50000")
    with pytest.raises(SpecError) as info:
        check_batch_bytes(spec, {"a": sizes}, left=left)
    said = str(info.value)
    assert info.value.key == "models[0].batch_max_bytes" and "\n" not in said
    whose = "the 224 queries its folder has left to ask" if left else "its 224 planned queries"
    assert (f"at least {least} (or left out) for a bedrock batch model, not 50000: bedrock's "
            f"jobs hold at least 100 lines, and at 50000 bytes a job holds as few as 20 of the "
            f"lines of {whose}; at {least} it holds any 199 of them") in said
    with pytest.raises(SpecError):
        check_batch_bytes(_load(tmp_path, f"batch_max_bytes = {least - 1}"), {"a": sizes})
    with pytest.raises(SpecError) as info:  # "at 1 bytes"
        check_batch_bytes(_load(tmp_path, "batch_max_bytes = 1"), {"a": sizes}, left=left)
    assert "not 1: bedrock's jobs hold at least 100 lines, and at 1 byte a job" in str(info.value)


def test_the_sizing_client_writes_the_real_clients_lines() -> None:
    """Sized with the simulator's credentials and addresses, which no line carries."""
    model = ModelConfig(
        name="a", provider="bedrock", model="anthropic.claude", dispatch="batch",
        region="eu-west-1", batch_bucket="s3://real/prefix", max_tokens=700, temperature=0.2,
        batch_role_arn="arn:aws:iam::123456789012:role/batch", extra={"batch_max_bytes": "9000"},
    )  # fmt: skip
    keys = {"AWS_ACCESS_KEY_ID": "AKIAREAL", "AWS_SECRET_ACCESS_KEY": "secret"}
    real = BedrockBatchClient(model, keys)
    request = ChatRequest("0123456789abcdef01234567", "system", "user é", 7, ("Q01",), None)
    sized = sizing_client(model)
    assert sized.line(request) == real.line(request)
    assert sized.limits == real.limits
