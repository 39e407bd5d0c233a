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
    known = TOKENIZERS["gemma3"]
    assert gemma.label.startswith("rough: gemma3 calibrated (1.38 tokens per digit")
    # digits are tokens one by one; the rest by the calibrated ratio; plus a per-request cost
    assert gemma.prompt_tokens("", "9" * 300) == round(300 * known.tokens_per_digit
                                                        + known.tokens_per_request)
    assert gemma.prompt_tokens("", "a" * 460) == round(460 / known.chars_per_token
                                                        + known.tokens_per_request)
    # the gemma template drops an unfolded system message; folded, it is counted
    assert gemma.prompt_tokens("a" * 460, "b") < estimator("gemma3", fold_system=True)\
        .prompt_tokens("a" * 460, "b")


def test_plan_labels_each_models_token_count(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(GGUF_ENV, str(tmp_path / "absent.gguf"))
    spec = load_spec(SPEC)
    summary = summarise(estimate(spec))
    methods = summary["total"]["tokens_in_method"]
    assert set(methods) == {m.name for m in spec.models}
    assert all(label.startswith("rough: gemma3 calibrated") for label in methods.values())
