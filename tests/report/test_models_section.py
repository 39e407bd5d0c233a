"""report.md's "Models" section: simulated forecasters and each model's `about` line, read
from the run's frozen spec."""

from __future__ import annotations

import html
from pathlib import Path

from runs import markdown
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


def test_each_simulated_personality_is_said_in_the_simulators_own_words(tmp_path: Path) -> None:
    """sim-coherent is incoherent on isolated families by design; "answered from the local
    simulator" alone left a reader to take that for a fault."""
    from providers.sim.forecasters import PERSONALITY_WORDS
    from runs.report_page import render_page

    (tmp_path / "spec.toml").write_text(
        '[[models]]\nname = "GPT-OSS-120B"\nprovider = "sim"\nmodel = "sim-coherent"\n'
        '[[models]]\nname = "b"\nprovider = "sim"\nmodel = "anything"\npersonality = "noisy"\n'
        '[[models]]\nname = "c"\nprovider = "sim"\nmodel = "sim-noisy"\n'
        '[[models]]\nname = "real"\nprovider = "openai"\nmodel = "sim-fraction"\n',
        encoding="utf-8",
    )
    spec = frozen_spec(tmp_path)
    text = models_markdown(spec)
    assert text is not None
    coherent = markdown.text(PERSONALITY_WORDS["coherent"])  # its `~` escaped
    assert f"- Personality coherent (GPT-OSS-120B): {coherent}" in text
    assert f"- Personality noisy (b, c): {markdown.text(PERSONALITY_WORDS['noisy'])}" in text
    assert "fraction" not in text  # "real" is not simulated
    assert "sum to one" in PERSONALITY_WORDS["coherent"]  # the isolated families' caveat
    page = render_page({}, [], tmp_path / "report", spec=spec)
    said = html.escape(PERSONALITY_WORDS["coherent"])
    assert f"<strong>coherent</strong> (GPT-OSS-120B): {said}" in page
    # A rehearsal: every model simulated, each with the personality its id is sent as.
    assert "Personality fraction (real)" in (models_markdown(spec, rehearsed=True) or "")


def test_a_model_whose_replies_named_the_simulator_is_simulated_in_part_or_whole() -> None:
    """`attempts.model_reported` naming the simulator (`sim/<personality>`) makes a spec's
    real model simulated, in part with counts where another model answered the rest."""
    from runs.report.models import (
        in_part_of,
        personalities,
        simulated_models,
        simulated_note,
        simulator_replies,
    )

    spec = {"models": [{"name": "gemma", "provider": "openai", "model": "sim-noisy"},
                       {"name": "real", "provider": "openai"},
                       {"name": "whole", "provider": "openai"}]}
    reported = {"gemma": {"gemma-3-270m": 8, "sim/anchored": 50},
                "real": {"gpt-4o": 3}, "whole": {"sim/coherent": 4}}
    assert simulated_models(spec) == []
    assert simulated_models(spec, reported=reported) == ["gemma", "whole"]
    found = simulator_replies(reported)
    assert (found["gemma"].simulator, found["gemma"].replies, found["gemma"].in_part) == (
        50, 58, True
    )
    assert not found["whole"].in_part
    # The personality the replies named, not the one the spec's id would be sent as.
    assert [(p, names) for p, names, _ in personalities(spec, reported=reported)] == [
        ("coherent", ["whole"]), ("anchored", ["gemma"])
    ]
    models = {"gemma": {"simulated": True, "simulator_replies": {"simulator": 50, "replies": 58}},
              "whole": {"simulated": True, "simulator_replies": {"simulator": 4, "replies": 4}},
              "sim-a": {"simulated": True, "simulator_replies": None}}
    assert in_part_of(models) == {"gemma": (50, 58)}
    assert simulated_note(["gemma", "sim-a", "whole"], in_part_of(models), show=str.upper) == (
        "Simulated forecasters: SIM-A, WHOLE (answered by the local simulator, not real "
        "models); GEMMA in part (50 of 58 replies from the local simulator)."
    )
    assert simulated_note(["sim-a"]) == (
        "Simulated forecasters: sim-a (answered by the local simulator, not real models)."
    )


def test_a_model_of_provider_sim_is_not_said_again_by_its_replies() -> None:
    """A reviewer: the quickstart's Models section, after saying its five simulated
    forecasters and their personalities, gave each a bullet of its replies naming the
    simulator ("702 of 702 replies named the local simulator ..."), saying it all twice."""
    from runs.report.models import model_notes, models_markdown

    spec = {"models": [{"name": "sim-a", "provider": "sim", "model": "sim-anchored"},
                       {"name": "gemma", "provider": "openai", "about": "a real model"}]}
    reported = {"sim-a": {"sim/anchored": 702}, "gemma": {"sim/noisy": 5}}
    notes = dict(model_notes(spec, reported=reported))
    assert set(notes) == {"gemma"} and notes["gemma"].startswith("5 of 5 replies named")
    section = models_markdown(spec, reported=reported)
    assert section is not None and "702" not in section and "sim-a" in section


def test_a_real_model_whose_id_begins_like_the_simulators_is_not_simulated() -> None:
    """A server that echoes the model id it was asked for (vLLM, llama.cpp) named a real
    model "sim/my-finetune", and every view labelled it simulated: only the simulator's own
    names (`sim/<personality>`) count."""
    from runs.report.models import simulated_models, simulator_replies

    reported = {"finetune": {"sim/my-finetune": 65}, "behind": {"sim/noisy": 3, "x": 1}}
    assert set(simulator_replies(reported)) == {"behind"}
    spec = {"models": [{"name": "finetune", "provider": "openai"}]}
    assert simulated_models(spec, reported=reported) == ["behind"]
