"""Token estimates say how they were made: a known tokenizer exactly, or rough and labelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.planner import estimate, summarise
from runs.spec import load_spec
from runs.tokens import GGUF_ENV, ROUGH_CHARS_PER_TOKEN, TOKENIZERS, estimator

SPEC = Path(__file__).parents[2] / "runs" / "specs" / "local.toml"


def test_a_model_without_a_tokenizer_gets_the_rough_english_estimate() -> None:
    rough = estimator(None)
    assert not rough.exact
    assert rough.label == "rough: 4 characters per token"
    assert rough.prompt_tokens("ab" * 10, "cd" * 10) == round(40 / ROUGH_CHARS_PER_TOKEN)


def test_a_known_tokenizer_without_its_file_is_rough_and_calibrated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(GGUF_ENV, str(tmp_path / "absent.gguf"))
    gemma = estimator("gemma3")
    assert not gemma.exact
    ratio = TOKENIZERS["gemma3"].chars_per_token
    assert gemma.label == f"rough: gemma3 calibrated, {ratio:g} characters per token"
    assert gemma.prompt_tokens("", "9" * 300) == round(300 / ratio)


def test_plan_labels_each_models_token_count(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(GGUF_ENV, str(tmp_path / "absent.gguf"))
    spec = load_spec(SPEC)
    summary = summarise(estimate(spec))
    methods = summary["total"]["tokens_in_method"]
    assert set(methods) == {m.name for m in spec.models}
    assert all(label.startswith("rough: gemma3 calibrated") for label in methods.values())
