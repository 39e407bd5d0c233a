"""A model's option values are checked as its run builds it, before a run folder is touched
(`runs.model_options`): a rehearsal refused a bad `reasoning_effort` only after saving the
folder's design, so the corrected spec was then refused as another design."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runs.cli import app
from runs.model_options import check_model_options
from runs.spec import SpecError, load_spec

SPEC = """
name = "options"
seed = 2
[data]
stock_days = 2
[[models]]
name = "m"
{model}
[[arms]]
name = "baseline"
"""
GROQ = 'provider = "groq"\nmodel = "openai/gpt-oss-120b"\nreasoning_effort = "{effort}"'
BEDROCK = (
    'provider = "bedrock"\nmodel = "anthropic.claude-opus-4-6-v1"\n'
    'reasoning_effort = "{effort}"\nmax_tokens = 4000'
)


def write_spec(tmp_path: Path, model: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(model=model), encoding="utf-8")
    return path


def test_a_rehearsal_refuses_a_bad_value_before_its_folder_is_made(tmp_path: Path) -> None:
    """The refusal names the file and the key, leaves no folder, and the corrected spec then
    runs into the same --out (it was refused: "run with a different design")."""
    spec, out = write_spec(tmp_path, GROQ.format(effort="extreme")), tmp_path / "R"
    refused = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--rehearse"])
    assert refused.exit_code == 2, refused.output
    assert f"{spec}: models[0].reasoning_effort: " in refused.output, refused.output
    assert "'extreme' is not one this model takes" in refused.output, refused.output
    assert "--rehearse" not in refused.output, refused.output
    assert not out.exists()
    write_spec(tmp_path, GROQ.format(effort="low"))
    ran = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--rehearse"])
    assert ran.exit_code == 0, ran.output


@pytest.mark.parametrize("model", [GROQ, BEDROCK], ids=["groq", "bedrock"])
@pytest.mark.parametrize("rehearse", [True, False])
def test_a_bad_reasoning_effort_is_the_specs_key(
    tmp_path: Path, model: str, rehearse: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rehearsing or not, with no credential set: the value is refused, not the environment."""
    for variable in ("GROQ_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(variable, raising=False)
    spec = load_spec(write_spec(tmp_path, model.format(effort="extreme")))
    with pytest.raises(SpecError) as info:
        check_model_options(spec, rehearse=rehearse)
    assert info.value.key == "models[0].reasoning_effort", info.value
    assert "'extreme'" in str(info.value)
    check_model_options(load_spec(write_spec(tmp_path, model.format(effort="low"))))


def test_a_bad_value_is_refused_without_the_rehearse_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a key set, the value alone is wrong: --rehearse (offered for a missing key) would
    not mend it. Without one, a good value's refusal still offers it."""
    monkeypatch.setenv("GROQ_API_KEY", "not-a-real-key")
    spec = write_spec(tmp_path, GROQ.format(effort="extreme"))
    refused = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "R")])
    assert refused.exit_code == 2, refused.output
    assert f"{spec}: models[0].reasoning_effort: " in refused.output, refused.output
    assert "--rehearse" not in refused.output, refused.output
    monkeypatch.delenv("GROQ_API_KEY")
    write_spec(tmp_path, GROQ.format(effort="low"))
    lacking = CliRunner().invoke(app, ["run", str(spec), "--out", str(tmp_path / "R")])
    assert lacking.exit_code == 2, lacking.output
    assert "set GROQ_API_KEY" in lacking.output and "--rehearse" in lacking.output
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize(
    ("model", "key"),
    [
        (GROQ.format(effort="extreme"), "reasoning_effort"),
        ('provider = "openai"\nmodel = "gpt-4o"\napi_key_env = "MY_OPENAI_KEY"', "base_url"),
    ],
    ids=["reasoning_effort", "base_url"],
)
def test_plan_refuses_what_run_refuses(
    tmp_path: Path, model: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan` passed these (exit 0) and `run` refused them."""
    monkeypatch.delenv("MY_OPENAI_KEY", raising=False)
    spec = write_spec(tmp_path, model)
    refused = CliRunner().invoke(app, ["plan", str(spec)])
    assert refused.exit_code == 2, refused.output
    assert f"{spec}: models[0].{key}: " in refused.output, refused.output


def test_plan_asks_for_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose key is not set is planned: the key is the run's to find."""
    for variable in ("GROQ_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(variable, raising=False)
    for model in (GROQ.format(effort="low"), BEDROCK.format(effort="high")):
        planned = CliRunner().invoke(app, ["plan", str(write_spec(tmp_path, model))])
        assert planned.exit_code == 0, planned.output


def test_plan_refuses_a_batch_bucket_run_refuses_but_asks_for_none(tmp_path: Path) -> None:
    """A bucket name S3 refuses is the spec's; a batch model with no bucket or role yet is
    planned (a rehearsal fills them in; `run` asks for them as for a key)."""
    model = (
        'provider = "bedrock"\nmodel = "anthropic.claude-sonnet-4-5"\nregion = "us-east-1"\n'
        'dispatch = "batch"\n'
    )
    planned = CliRunner().invoke(app, ["plan", str(write_spec(tmp_path, model))])
    assert planned.exit_code == 0, planned.output
    spec = write_spec(tmp_path, model + 'batch_bucket = "s3://b/runs"')
    refused = CliRunner().invoke(app, ["plan", str(spec)])
    assert refused.exit_code == 2, refused.output
    assert f"{spec}: models[0].batch_bucket: " in refused.output, refused.output


@pytest.mark.parametrize(
    "model",
    [
        'provider = "vertex"\nmodel = "gemini-2.5-flash"\nproject = "p"\nlocation = "us-central1"'
        '\napi_key_env = "VERTEX_TOKEN"',
        'provider = "bedrock"\nmodel = "anthropic.claude-sonnet-4-5"\nregion = "us-east-1"\n'
        'api_key_env = "MY_BEDROCK_KEY"',
    ],
)
def test_a_model_naming_its_own_key_variable_is_planned_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    """A reviewer's: a Vertex model with `api_key_env = "VERTEX_TOKEN"` (a ready access
    token) or a Bedrock one with its own key variable was refused by `plan` and `run`, set or
    not: "VERTEX_TOKEN (an access token) is not set" (the checks' stand-in credentials named
    no such variable)."""
    for variable in ("VERTEX_TOKEN", "MY_BEDROCK_KEY"):
        monkeypatch.delenv(variable, raising=False)
    spec = write_spec(tmp_path, model)
    planned = CliRunner().invoke(app, ["plan", str(spec)])
    assert planned.exit_code == 0, planned.output
    check_model_options(load_spec(spec))


def test_a_folder_made_with_a_key_now_refused_resumes_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reviewer's: a folder made while a key of another provider was taken (`region` on a
    model that never reads it) keeps it in its frozen spec; refused on load, it could be
    neither resumed (removing the key is a change of design) nor reported. A new run is
    refused; the folder's own spec resumes it and `report` reads it."""
    import runs.pipeline

    spec = write_spec(tmp_path, 'provider = "sim"\nmodel = "sim-coherent"\nregion = "us-east-1"')
    out = tmp_path / "made-before"
    refused = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert refused.exit_code == 2, refused.output
    assert "models[0].region: a key of bedrock models, not of sim" in refused.output
    assert not out.exists()
    with monkeypatch.context() as before:  # the folder as a run before the check made it
        before.setattr(runs.pipeline, "check_keys_read", lambda spec: None)
        made = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert made.exit_code == 0, made.output
    resumed = CliRunner().invoke(app, ["run", str(spec), "--out", str(out)])
    assert resumed.exit_code == 0, resumed.output
    reported = CliRunner().invoke(app, ["report", str(out)])
    assert reported.exit_code == 0, reported.output
