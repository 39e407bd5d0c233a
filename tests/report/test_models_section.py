"""report.md's "Models" section: simulated forecasters and each model's `about` line, read
from the run's frozen spec."""

from __future__ import annotations

from pathlib import Path

from runs.report.models import frozen_spec, models_markdown


def test_the_section_names_simulated_models_and_describes_real_ones(tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text(
        'name = "x"\n'
        '[[models]]\nname = "gemma"\nprovider = "openai"\nabout = "a 270M base model"\n'
        '[[models]]\nname = "sim-a"\nprovider = "sim"\n',
        encoding="utf-8",
    )
    text = models_markdown(frozen_spec(tmp_path))
    assert text is not None
    assert text.startswith("## Models\n")
    assert "Simulated forecasters (sim-a)" in text
    assert "- **gemma**: a 270M base model" in text


def test_no_section_without_anything_to_say_or_without_a_readable_spec(tmp_path: Path) -> None:
    assert models_markdown(frozen_spec(tmp_path)) is None  # no spec.toml
    (tmp_path / "spec.toml").write_bytes(b"\xff\xfe not toml")
    assert frozen_spec(tmp_path) == {}
    (tmp_path / "spec.toml").write_text('[[models]]\nname = "m"\nprovider = "groq"\n')
    assert models_markdown(frozen_spec(tmp_path)) is None
