"""Campaign specs: a TOML file read strictly, so that a typo fails before a cent is spent.

Every problem is reported as `SpecError` naming the file, the key (as a dotted path such as
`models[2].rpm`) and what was expected. Parsing uses `tomllib` only: nothing in a spec is ever
evaluated as code, and secrets are never read from it (only the *names* of variables).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from providers.batch import BatchLimits
from providers.constrained import RESPONSE_FORMATS
from providers.secrets import looks_like_credential, looks_like_unprefixed_key
from providers.types import MAX_CONCURRENCY, PROVIDERS, TOKEN_FIELDS, ModelConfig
from providers.urls import base_url_problem
from runs.input_kind import json_object, not_a_spec, spec_or_probabilities
from runs.tokens import TOKENIZERS

PARSERS = ("strict", "lenient")


class SpecError(ValueError):
    """A spec that cannot be run as written."""

    def __init__(self, file: Path | str, key: str, expected: str) -> None:
        self.file, self.key, self.expected = str(file), key, expected
        where = f"{self.file}: {key}: " if key else f"{self.file}: "
        super().__init__(where + expected)


#: The design settings a spec may leave out (a resume compares a spec with them filled in,
#: `runs.design.spec_changes`: written out or left out, one design).
DEFAULT_SEED = 0
DEFAULT_PARSER = "strict"
DEFAULT_STOCK_DAYS = 100
DEFAULT_PASSES = 1


@dataclass(frozen=True)
class ArmEntry:
    name: str
    passes: int
    models: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DataSpec:
    """Where units come from; `None` paths mean the embedded defaults."""

    returns: Path | None = None
    headlines: Path | None = None
    stock_days: int = DEFAULT_STOCK_DAYS
    families: Path | None = None
    #: The first and last anchor date a stock-day may have, both included (the paper's
    #: "t ranging from August 15, 2025 to December 23, 2025"); None: no bound.
    anchor_from: date | None = None
    anchor_to: date | None = None


DEFAULT_MAX_ATTEMPTS = 8
DEFAULT_MAX_ANSWER_FAILURES = 3


def default_answer_failures(max_attempts: int) -> int:
    """`max_answer_failures` where a spec names none: at most `max_attempts`."""
    return min(DEFAULT_MAX_ANSWER_FAILURES, max_attempts)


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    seed: int
    parser: str
    data: DataSpec
    models: tuple[ModelConfig, ...]
    arms: tuple[ArmEntry, ...]
    path: Path
    coverage_floor: float = 0.9
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    #: Attempts per request that may fail on the answer itself (truncated, invalid), counted
    #: across resumes; smaller than `max_attempts` because such failures tend to repeat.
    max_answer_failures: int = DEFAULT_MAX_ANSWER_FAILURES
    #: Faults the local simulator injects (sim models, `--rehearse`): a profile of
    #: `providers.sim.faults` or `kind=rate,...`; operational, it changes no answer.
    sim_faults: str = "none"
    text: str = field(default="", repr=False, compare=False)

    def model(self, name: str) -> ModelConfig:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)

    def models_for(self, arm: ArmEntry) -> tuple[ModelConfig, ...]:
        if arm.models is None:
            return self.models
        return tuple(m for m in self.models if m.name in arm.models)

    @property
    def digest(self) -> str:
        """Hash of the spec text, to tell a resume of the same campaign from a different one."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]


_TOP_KEYS = {
    "name",
    "seed",
    "parser",
    "data",
    "models",
    "arms",
    "coverage_floor",
    "max_attempts",
    "max_answer_failures",
    "sim_faults",
}
_DATA_KEYS = {"returns", "headlines", "stock_days", "families", "anchor_from", "anchor_to"}
_ARM_KEYS = {"name", "passes", "models"}
#: The largest `max_tokens`: the biggest signed 32-bit integer, the type providers' APIs give
#: it. A reply's token budget is multiplied by the campaign's queries for the estimate (at
#: most `runs.planner.MAX_CAMPAIGN_QUERIES`), which must stay a 64-bit integer: a 45-digit
#: `max_tokens` planned the campaign and then ended `run` in orjson's TypeError traceback.
MAX_TOKENS = 2**31 - 1
#: The most a price may be, USD per million tokens: far above any model's (a few hundred),
#: and low enough that no campaign's cost overflows to infinity (1e305 printed "$inf").
MAX_PRICE = 1e6
#: Longest `about` text a model may carry (one line of the report).
ABOUT_MAX = 200
#: Longest `price_source` (a pricing page's address or a citation).
SOURCE_MAX = 300
#: Spec price keys -> ModelConfig fields (the only model keys whose names differ).
_PRICE_FIELDS = {
    "price_in": "price_in_per_mtok",
    "price_out": "price_out_per_mtok",
    "batch_price_in": "batch_price_in_per_mtok",
    "batch_price_out": "batch_price_out_per_mtok",
}
# Spec key -> (type(s), check, description). ModelConfig field names match spec keys except prices.
_MODEL_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": ((str,), "a non-empty string"),
    "provider": ((str,), f"one of {', '.join(PROVIDERS)}"),
    "model": ((str,), "the provider's model id (a non-empty string)"),
    "base_url": ((str,), "an http(s) URL"),
    # Over 1: a limit of one a minute or less is not one the token bucket can pace
    # (`engine.limits.TokenBucket.per_minute`), and `run` failed on it with a traceback.
    "rpm": ((int, float), "requests per minute > 1"),
    "tpm": ((int, float), "tokens per minute > 1"),
    "concurrency": ((int,), f"an integer from 1 to {MAX_CONCURRENCY:,}"),
    "temperature": ((int, float), "a number in [0, 2]"),
    "max_tokens": ((int,), f"an integer from 1 to {MAX_TOKENS:,}"),
    "seed": ((int,), "an integer"),
    "reasoning_effort": ((str,), "a string such as low, medium or high"),
    "json_mode": ((bool,), "true or false"),
    "response_format": ((str,), f"one of {', '.join(RESPONSE_FORMATS)}"),
    "fold_system": ((bool,), "true or false"),
    "tokenizer": ((str,), f"one of {', '.join(TOKENIZERS)}"),
    "api_key_env": ((str,), "the NAME of an environment variable (never the key itself)"),
    "region": ((str,), "a cloud region such as us-east-1"),
    "project": ((str,), "a Google Cloud project id"),
    "location": ((str,), "a Google Cloud location such as us-central1"),
    "api_version": ((str,), "an API version string"),
    "timeout_s": ((int, float), "seconds > 0"),
    "max_down_s": (
        (int, float),
        "seconds > 0: how long a lane may be down before it stops (omit it to probe until "
        "the provider comes back)",
    ),
    "price_in": ((int, float), "USD per million input tokens, 0 to 1,000,000"),
    "price_out": ((int, float), "USD per million output tokens, 0 to 1,000,000"),
    "batch_price_in": (
        (int, float), "USD per million input tokens through the batch API, 0 to 1,000,000"
    ),
    "batch_price_out": (
        (int, float), "USD per million output tokens through the batch API, 0 to 1,000,000"
    ),
    "price_date": ((str,), "the date the prices were read, as YYYY-MM-DD"),
    "price_source": (
        (str,),
        f"where the prices were read: a URL or a citation (one line, "
        f"at most {SOURCE_MAX} characters)",
    ),
    "dispatch": ((str,), "'live' (one request per query) or 'batch' (the provider's batch API)"),
    "batch_bucket": ((str,), "where batch files live: s3://bucket/prefix or gs://bucket/prefix"),
    "batch_role_arn": ((str,), "the IAM role ARN Bedrock assumes for batch jobs (arn:...)"),
    "batch_fallback": ((str,), "'batch' (failed lines go into the next job) or 'live'"),
    "batch_max_lines": ((int,), "an integer >= 1 (lowers the provider's lines per job)"),
    "batch_max_bytes": ((int,), "an integer >= 1 (lowers the provider's bytes per job)"),
    "batch_max_jobs": ((int,), "an integer >= 1 (lowers the provider's jobs in flight)"),
    "personality": ((str,), "a simulated forecaster's personality"),
    "deployment": ((str,), "an Azure deployment name"),
    "base_model": ((str,), "the model behind a deployment or gateway alias (e.g. gpt-5)"),
    "token_field": ((str,), "max_tokens or max_completion_tokens"),
    "endpoint": ((str,), "'openai' or 'gemini' (Vertex)"),
    "base_url_env": ((str,), "the NAME of a variable whose value, when set, replaces base_url"),
    "about": ((str,), f"a short description for the report (at most {ABOUT_MAX} characters)"),
}
#: The model options a spec may leave out that a run then builds at a value of its own (the
#: `ModelConfig` default, `json_mode = false`, `timeout_s = 120`, ...), by spec key: a
#: resume compares a model with them filled in (`runs.design.spec_changes`). `temperature`,
#: `max_tokens` and the like have none: left out, nothing is sent and the provider's own
#: default, which differs by provider and model, applies.
DEFAULT_MODEL_OPTIONS: Mapping[str, Any] = {
    option.name: option.default
    for option in fields(ModelConfig)
    if option.name in _MODEL_KEYS and option.default not in (MISSING, None)
}
#: Provider-specific keys passed through to `ModelConfig.extra` for the adapters.
_EXTRA_KEYS = (
    # Lower (never raise) a batch provider's documented job limits: small jobs for a rehearsal.
    "batch_max_lines",
    "batch_max_bytes",
    "batch_max_jobs",
    "personality",
    "deployment",
    "base_model",
    "token_field",
    "endpoint",
    "base_url_env",
)


#: Model keys only some providers' adapters read, by the providers that read them: on another
#: provider's model one was taken and ignored (`region = "us-east-1"` on an openai model ran
#: without a word), though unknown keys are refused. `base_url_env` has its own refusal
#: (`_check_base_url_env`); the other keys are read by every provider, or are the run's own.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "region": ("bedrock",),
    "project": ("vertex",),
    "location": ("vertex",),
    "api_version": ("azure", "vertex"),
    "batch_bucket": ("bedrock", "vertex"),
    "batch_role_arn": ("bedrock",),
    "deployment": ("azure",),
    "endpoint": ("vertex",),
    "personality": ("sim",),
    # Bedrock's Converse sends its own `maxTokens`; every OpenAI-shaped body takes either name.
    "token_field": ("openai", "groq", "deepinfra", "azure", "sim", "vertex"),
}


def check_keys_read(spec: CampaignSpec) -> None:
    """Refuse a model key its provider never reads: a key of another provider's
    (`PROVIDER_KEYS`: `region` on an openai model ran to the end ignored) or a sim model's
    `base_url` (the run started its own simulator; `--sim-url` names another).

    Asked of a spec that starts a new run folder (`run`) or is planned (`plan`), not of one
    resuming a folder or read back from it (`report`, `score`, `status`): a folder made while
    such keys were taken keeps them in its frozen spec, and removing one is a change of
    design, so refused on load it could be neither resumed nor reported."""
    raw = tomllib.loads(spec.text) if spec.text else read_spec_table(spec.path)[0]
    for index, entry in enumerate(raw.get("models", [])):
        if isinstance(entry, dict):
            _check_sim_base_url(entry, spec.path, f"models[{index}].")
            _check_provider_keys(entry, spec.path, f"models[{index}].")


def _check_provider_keys(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """Refuse a key that no adapter of this model's provider reads (`PROVIDER_KEYS`)."""
    provider = entry["provider"]
    for key, providers in PROVIDER_KEYS.items():
        if key in entry and not _takes(provider, key):
            raise SpecError(
                path, where + key,
                f"a key of {', '.join(providers)} models, not of {provider}: no {provider} "
                "model reads it; remove it",
            )  # fmt: skip


def read_spec_table(path: Path) -> tuple[dict[str, Any], str]:
    """A spec file's TOML table and text, read as every input file is (bounded, a device
    refused, nesting and integer length guarded); `SpecError` in one line otherwise. What
    `load_spec` validates, and what a reader needing one key (`runs.local_model`) reads."""
    # Here, not at the top: `panels` imports numpy, and importing this module should not.
    from panels import toml_text
    from panels.input_files import (
        TEXT_INPUT_MAX_BYTES,
        InputFileError,
        not_utf8,
        read_input_file,
    )

    try:
        text = toml_text.decode(read_input_file(path, TEXT_INPUT_MAX_BYTES))
    except InputFileError as exc:
        raise SpecError(path, "", str(exc)) from None
    except FileNotFoundError:
        raise SpecError(path, "", "no such file") from None
    except OSError as exc:
        raise SpecError(path, "", f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(path, "", not_utf8(exc)) from None
    try:
        return toml_text.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        # A JSON object is no TOML document: a `check` file in JSON, or a spec mistyped.
        if spec_or_probabilities(json_object(text)) == "probabilities":
            raise SpecError(path, "", not_a_spec(path)) from None
        raise SpecError(path, "", f"not valid TOML ({exc})") from None


def load_spec(
    path: str | Path, *, arm_names: set[str] | None = None, data_must_exist: bool = True
) -> CampaignSpec:
    """Read and validate a spec. `arm_names` is the catalogue to check arms against.

    `data_must_exist=False` resolves the `[data]` paths without asking that they exist: for a
    command that reads a run folder's frozen copy and needs no data (`report`), where a path
    written relative to the original spec's folder does not resolve from the run folder."""
    path = Path(path)
    raw, text = read_spec_table(path)
    if arm_names is None:
        from panels.arms import ARMS

        arm_names = set(ARMS)
    return parse_spec(raw, path, arm_names=arm_names, text=text, data_must_exist=data_must_exist)


def parse_spec(
    raw: Mapping[str, Any],
    path: Path,
    *,
    arm_names: set[str],
    text: str = "",
    data_must_exist: bool = True,
) -> CampaignSpec:
    # First, but for the variables' names: a key pasted as a provider's or a parser's value
    # was quoted in full by that key's own refusal. Theirs say it is a key (`_model_config`).
    if (where := _credential_at(raw, passed_over=_NOT_SEARCHED | _ENV_KEYS)) is not None:
        raise _holds_credential(path, where)
    if (line := _credential_in_comment(text)) is not None:
        raise _holds_credential(path, f"line {line}", "a comment here")
    if raw.keys() - _TOP_KEYS and spec_or_probabilities(raw) == "probabilities":
        raise SpecError(path, "", not_a_spec(path))
    _unknown(raw, _TOP_KEYS, path, "")
    name = _get(raw, "name", str, path, "", "a campaign name (letters, digits, - and _)")
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise SpecError(path, "name", "letters, digits, '-' and '_' only (it names the run folder)")
    seed = _get(raw, "seed", int, path, "", "an integer >= 0", default=DEFAULT_SEED)
    if seed < 0:  # numpy's generators (the stock-day sample) take no negative seed
        raise SpecError(path, "seed", "an integer >= 0")
    parser = _get(raw, "parser", str, path, "", "strict or lenient", default=DEFAULT_PARSER)
    if parser not in PARSERS:
        raise SpecError(path, "parser", f"strict or lenient, not {parser!r}")
    floor = _finite(_get(raw, "coverage_floor", (int, float), path, "", "a number", default=0.9))
    if floor is None or not 0 <= floor <= 1:
        raise SpecError(path, "coverage_floor", "a share in [0, 1]")
    max_attempts, answer_failures = retry_limits(raw, path)
    sim_faults = _get(raw, "sim_faults", str, path, "", "a fault profile", default="none")
    _check_faults(sim_faults, path)
    data = _parse_data(raw.get("data", {}), path, must_exist=data_must_exist)
    models = _parse_models(raw.get("models"), path)
    arms = _parse_arms(raw.get("arms"), path, arm_names, {m.name for m in models})
    if (where := _credential_at(raw)) is not None:  # after the checks that name a key's role
        raise _holds_credential(path, where)
    return CampaignSpec(
        name=name,
        seed=seed,
        parser=parser,
        data=data,
        models=models,
        arms=arms,
        path=path,
        coverage_floor=floor,
        max_attempts=max_attempts,
        max_answer_failures=answer_failures,
        sim_faults=sim_faults,
        text=text,
    )


def retry_limits(raw: Mapping[str, Any], path: Path) -> tuple[int, int]:
    """(`max_attempts`, `max_answer_failures`) of a spec's top-level table, their defaults
    where it names none; SpecError unless each is a whole number of at least 1 and the
    budget is at most the attempts. `runs.audit` reads a frozen spec's budget by this rule."""
    max_attempts = _get(
        raw, "max_attempts", int, path, "", "an integer", default=DEFAULT_MAX_ATTEMPTS
    )
    if max_attempts < 1:
        raise SpecError(path, "max_attempts", "an integer >= 1")
    answer_failures = _get(
        raw, "max_answer_failures", int, path, "", "an integer",
        default=default_answer_failures(max_attempts),
    )
    if not 1 <= answer_failures <= max_attempts:
        raise SpecError(
            path, "max_answer_failures", f"an integer in [1, max_attempts={max_attempts}]"
        )
    return max_attempts, answer_failures


#: Keys whose values are not searched for a credential: names, model ids and data paths,
#: where a look-alike is likelier than a pasted key (a spec refused a model id).
_NOT_SEARCHED = frozenset({"name", "model", "data"})
#: The keys whose value names an environment variable, whose own checks say when it is a key.
_ENV_KEYS = frozenset({"api_key_env", "base_url_env"})


def _holds_credential(path: Path, where: str, what: str = "it") -> SpecError:
    """The refusal of a spec holding what looks like a credential, never showing it."""
    return SpecError(
        path,
        where,
        f"not used: {what} holds what looks like a credential (not shown); a key never goes "
        "in a spec, its comments included: put it in an environment variable and give that "
        "variable's name as api_key_env (in a run folder's spec.toml, remove it there and "
        "from spec-history.jsonl beside it)",
    )


def _credential_in_comment(text: str) -> int | None:
    """The line of the first comment of a spec's text holding what looks like a credential,
    or None. A key commented out (`# api_key = "gsk_..."`, an old one kept) was frozen into
    the run folder with the spec's text, which the table's search never saw."""
    from panels import toml_text  # here: importing this module should not import numpy

    for line, words in toml_text.comments(text):
        if looks_like_credential(words):
            return line
    return None


def _credential_at(
    value: Any, where: str = "", passed_over: frozenset[str] = _NOT_SEARCHED
) -> str | None:
    """Where in a spec's table a string shaped like a credential stands (`models[0].about`),
    or None. A key pasted where a variable's name goes (`api_key_env = "gsk_..."`) passed the
    name check, was printed in the "set gsk_... first" line, and was frozen into the run
    folder with the spec."""
    if isinstance(value, str):
        return where if looks_like_credential(value) else None
    items = (
        value.items() if isinstance(value, Mapping)
        else enumerate(value) if isinstance(value, list) else ()
    )  # fmt: skip
    for key, item in items:
        if key in passed_over:
            continue
        if isinstance(key, str) and looks_like_credential(key):  # `gsk_... = 1`: never quoted
            return f"{where}.<a key>" if where else "<a key>"
        inner = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key
        if (found := _credential_at(item, inner, passed_over)) is not None:
            return found
    return None


def _check_faults(value: str, path: Path) -> None:
    from providers.sim.faults import parse_faults

    try:
        parse_faults(value)
    except ValueError as exc:
        raise SpecError(
            path, "sim_faults", f"a fault profile or kind=rate pairs: {faults_refusal(exc)}"
        ) from None


def faults_refusal(exc: ValueError) -> str:
    """`parse_faults`' refusal, with "did you mean" for an unknown name near a known one:
    `sim_faults`, `run --faults` and `serve-sim --faults` said `flakey` was unknown without
    naming `flaky`, where every other typo of the CLI is told its nearest name."""
    from providers.sim.faults import UnknownFaultName

    if not isinstance(exc, UnknownFaultName):
        return str(exc)
    return exc.said(_close(exc.name, set(exc.choices), otherwise=""))


def _parse_data(raw: Any, path: Path, *, must_exist: bool = True) -> DataSpec:
    if not isinstance(raw, dict):
        raise SpecError(path, "data", "a table")
    _unknown(raw, _DATA_KEYS, path, "data.")
    base = path.parent

    def optional_path(key: str) -> Path | None:
        value = _get(raw, key, str, path, "data.", "a path relative to the spec file", default=None)
        if value is None:
            return None
        if not value or "\0" in value:  # "" named the spec's own folder; NUL, no file at all
            raise SpecError(
                path, f"data.{key}", "a path relative to the spec file (not empty, no NUL)"
            )
        given: Path = base / value
        try:
            resolved = given.resolve()
            found = resolved.exists() if must_exist else True
        except (OSError, RuntimeError) as exc:  # a name too long; a link loop (RuntimeError)
            if not must_exist:  # the report's spec: its data is never read
                return given
            raise SpecError(
                path, f"data.{key}",
                f"a file or folder ({given}: {getattr(exc, 'strerror', None) or exc})",
            ) from None
        if not must_exist:
            return resolved
        if not found:
            raise SpecError(
                path, f"data.{key}", f"a file or folder that exists ({resolved} does not)"
            )
        if key == "families" and not resolved.is_dir():  # was "/dev/null: not a directory"
            raise SpecError(path, "data.families", f"a folder of family files ({resolved} is not)")
        return resolved

    stock_days = _get(
        raw, "stock_days", int, path, "data.", "an integer", default=DEFAULT_STOCK_DAYS
    )
    if stock_days < 2 or stock_days % 2:
        raise SpecError(path, "data.stock_days", "an even integer >= 2 (two stocks per date)")
    anchor_from, anchor_to = (_anchor_date(raw, key, path) for key in ANCHOR_KEYS)
    if anchor_from is not None and anchor_to is not None and anchor_from > anchor_to:
        raise SpecError(
            path, "data.anchor_to",
            f"a date on or after data.anchor_from ({anchor_from}), not {anchor_to}",
        )  # fmt: skip
    return DataSpec(
        returns=optional_path("returns"),
        headlines=optional_path("headlines"),
        stock_days=stock_days,
        families=optional_path("families"),
        anchor_from=anchor_from,
        anchor_to=anchor_to,
    )


#: `[data]`'s bounds on the sampled stock-days' anchor dates.
ANCHOR_KEYS = ("anchor_from", "anchor_to")


def _anchor_date(raw: Mapping[str, Any], key: str, path: Path) -> date | None:
    """A calendar date, as a TOML date (2025-08-15) or a string written YYYY-MM-DD; a date
    with a time of day is refused (a stock-day is a trading day, not a moment)."""
    value = raw.get(key)
    if value is None:
        return None
    expected = "a date written YYYY-MM-DD (2025-08-15, quoted or not), no time of day"
    if isinstance(value, str):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise SpecError(path, f"data.{key}", f"{expected}, not {value!r}") from None
        if day.isoformat() != value:  # fromisoformat also reads 20250815
            raise SpecError(path, f"data.{key}", f"{expected}, not {value!r}")
        return day
    if isinstance(value, datetime) or not isinstance(value, date):
        shown = value.isoformat() if hasattr(value, "isoformat") else repr(value)
        raise SpecError(path, f"data.{key}", f"{expected}, not {shown}")
    return value


def _parse_models(raw: Any, path: Path) -> tuple[ModelConfig, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "models", "at least one [[models]] table")
    models: list[ModelConfig] = []
    for i, entry in enumerate(raw):
        where = f"models[{i}]."
        if not isinstance(entry, dict):
            raise SpecError(path, f"models[{i}]", "a table")
        provider = entry.get("provider")
        _unknown(entry, set(_MODEL_KEYS), path, where, listed=_model_keys(provider))
        for key, (types, expected) in _MODEL_KEYS.items():
            if key in entry and (
                not isinstance(entry[key], types)
                or (isinstance(entry[key], bool) and bool not in types)
            ):
                raise SpecError(path, where + key, expected)
        for key in ("name", "provider", "model"):
            if not entry.get(key):
                raise SpecError(path, where + key, _MODEL_KEYS[key][1])
        _check_shown_text(entry, path, where)
        name = entry["name"]
        if name != name.strip() or len(name) > MODEL_NAME_MAX:
            raise SpecError(
                path,
                where + "name",
                f"at most {MODEL_NAME_MAX} characters, without leading or trailing spaces "
                "(\"m\" and \"m \" would read as one model in every table)",
            )
        models.append(_model_config(entry, path, where))
    _check_unique_names([m.name for m in models], path)
    return tuple(models)


def _check_unique_names(names: list[str], path: Path) -> None:
    """Names unique as written. One name in two Unicode forms is refused by `check_one_form`
    when a new design is frozen, not here: this reads a run folder's frozen spec too, and a
    folder an earlier build ran with such a pair must stay readable."""
    for name in names:
        if names.count(name) > 1:
            raise SpecError(
                path, "models", f"unique names; {name!r} appears {names.count(name)} times"
            )


def check_one_form(spec: CampaignSpec) -> None:
    """Refuse a model name written twice in two Unicode forms ("café" with U+00E9 and "cafe"
    + U+0301): two strings drawn alike, they ran as two models no table, figure or page could
    tell apart; a name the report would misread (`_name_misread`); and a campaign or model
    name shaped like a credential (every table and page shows it whole, the logs masked it).
    For a design about to be frozen (a new run folder, `dutchbook plan`)."""
    from panels.input_files import form_clash  # a spec imports panels

    clash = form_clash(spec.models, lambda model: model.name)
    if clash is not None:
        other, name = clash[0].name, clash[1].name
        raise SpecError(
            spec.path,
            "models",
            f"unique names; {name!r} appears twice, as {other!a} and {name!a}: one name in "
            "two Unicode forms, drawn alike in every table",
        )
    if looks_like_credential(spec.name):
        raise SpecError(spec.path, "name", _NAMED_LIKE_A_KEY)
    size = len(spec.name.encode())
    if size > CAMPAIGN_NAME_MAX:  # `plan` took 300 characters and `run` failed to make out/x...
        raise SpecError(
            spec.path, "name",
            f"at most {CAMPAIGN_NAME_MAX} bytes in UTF-8 (it names the run folder), not {size:,}",
        )  # fmt: skip
    for index, model in enumerate(spec.models):
        if looks_like_credential(model.name):
            # Shown in every table and page, while the logs mask it: a key, or named like one.
            raise SpecError(spec.path, f"models[{index}].name", _NAMED_LIKE_A_KEY)
        if (why := _name_misread(model.name)) is not None:
            raise SpecError(spec.path, f"models[{index}].name", why)


def check_batch_floor(spec: CampaignSpec, left: Mapping[str, int] | None = None) -> None:
    """Refuse a batch model whose `batch_max_lines` is too few for its provider's smallest
    job (`BatchLimits.min_lines`: Bedrock's 100 lines) to hold for every count of queries
    (`providers.batch.BatchLimits.least_max_lines`): at 100 a job, 224 queries made two jobs
    and left 24 waiting for ever, said only at the end of the run. For every spec a run or
    `plan` is about to use, a resume's too (the key is operational: a resume may raise it);
    not when a folder's frozen spec is read, so a folder run with one stays readable.

    `left`, by model name, is what a resume has left to ask (`runs.pipeline`, from the
    folder's plan and ledger): a model found there is refused only if its cap strands some of
    those (`BatchLimits.stranded`), as every count need not be cut any more; fewer than the
    floor in all are not, as no cap would cut them."""
    for index, model in enumerate(spec.models):
        found = _short_batch_cap(model)
        if found is None:
            continue
        limits, least = found
        floor, cap = limits.min_lines, limits.max_lines
        count = None if left is None else left.get(model.name)
        if count is not None and (count < floor or not limits.stranded(count)):
            continue
        jobs = f"{floor} to {cap}" if cap > floor else f"{floor}"
        if cap < floor:
            why = f"no job of at most {cap} lines reaches it"
        elif count is None:
            why = (f"{cap + 1} queries, say, cannot be cut into jobs of {jobs} lines: the rest "
                   "would wait for ever")
        else:
            why = (f"the {count:,} queries its folder has left to ask cannot be cut into jobs of "
                   f"{jobs} lines: {limits.stranded(count):,} would wait for ever")
        raise SpecError(
            spec.path, f"models[{index}].batch_max_lines",
            f"at least {least} (or left out) for a {model.provider} batch model, not {cap}: "
            f"{model.provider}'s jobs hold at least {floor} lines, and {why} (queries already "
            f"left below {floor} are asked only with batch_fallback = \"live\")",
        )  # fmt: skip


def short_batch_models(spec: CampaignSpec) -> list[str]:
    """The batch models whose `batch_max_lines` `check_batch_floor` refuses without counts:
    those a resume counts the queries left of before it decides."""
    return [model.name for model in spec.models if _short_batch_cap(model) is not None]


def hash_picked_personalities(spec: CampaignSpec) -> list[str]:
    """One line per simulated model whose id names no personality and whose spec gives no
    `personality`: it answers as one its id's hash picks (`personality_for`), as documented,
    but `model = "sim-coherant"` (a typo) ran as another personality without a word, where
    every other typo of a spec is refused with "did you mean". Said by `plan` and `run`. So
    is an id that names its personality doubtfully (`named_doubtfully`): `sim-incoherent`
    answered as coherent without a word (a tester's)."""
    lines = []
    for model in spec.models:
        if model.provider != "sim" or model.extra.get("personality"):
            continue
        # Here, not at import: the forecasters cost a paid campaign's start (`rehearse`).
        from providers.sim.forecasters import (
            id_like,
            named_doubtfully,
            named_personality,
            personality_for,
        )

        if (named := named_personality(model.model)) is not None:
            if doubt := named_doubtfully(model.model):  # `sim-incoherent` ran as coherent
                lines.append(
                    f"{model.name}: model {model.model!r} answers as {named}: its id {doubt}; "
                    "name one personality on its own (sim-noisy) to choose another"
                )
            continue
        near = id_like(model.model)
        hint = f"did you mean {near}?" if near else "set `personality` to choose one"
        lines.append(
            f"{model.name}: model {model.model!r} names no simulated personality and the spec "
            f"gives none, so it answers as {personality_for(model.model)} (picked by the id's "
            f"hash); {hint}"
        )
    return lines


def check_batch_bytes(
    spec: CampaignSpec, sizes: Mapping[str, Sequence[int]], *, left: bool = False
) -> None:
    """Refuse a batch model whose `batch_max_bytes` cuts its lines into jobs below its
    provider's smallest (Bedrock's 100 lines), or strands some below it, as `check_batch_floor`
    refuses a `batch_max_lines` that would: `batch_max_bytes = 50000` cut a rehearsal's 224
    Bedrock queries into jobs of 21 lines, each refused at creation. `sizes`, by model name,
    are the bytes of the lines its lane would cut (its planned queries', or with `left` those
    its folder has left to ask); the least cap is `BatchLimits.least_max_bytes` of them, known
    only once the prompts are rendered (`runs.pipeline`, `plan`)."""
    for index, model in enumerate(spec.models):
        lines = sizes.get(model.name)
        if lines is None or (found := _model_batch_limits(model)) is None:
            continue
        limits = found[1]
        least, cap = limits.least_max_bytes(lines), limits.max_bytes
        if least <= cap:
            continue
        held, fewest = 0, 0  # how few of its lines a job may hold: its longest first
        for size in sorted(lines, reverse=True):
            if fewest and held + size + 1 > cap:
                break
            held, fewest = held + size + 1, fewest + 1
        whose = (f"the {len(lines):,} queries its folder has left to ask" if left
                 else f"its {len(lines):,} planned queries")
        most, floor = min(len(lines), limits.max_lines, limits.least_max_lines), limits.min_lines
        raise SpecError(
            spec.path, f"models[{index}].batch_max_bytes",
            f"at least {least} (or left out) for a {model.provider} batch model, not {cap}: "
            f"{model.provider}'s jobs hold at least {floor} lines, and at {cap} "
            f"byte{'' if cap == 1 else 's'} a job holds as few as {fewest} of the lines of "
            f"{whose}; at {least} it holds any {most} of them",
        )  # fmt: skip


def byte_capped_batch_models(spec: CampaignSpec) -> list[str]:
    """The batch models whose `batch_max_bytes` lowers the byte limit of a provider with a
    floor of lines a job (`BatchLimits.min_lines`): those whose lines `check_batch_bytes`
    is given, once rendered. The provider's own limit (Bedrock's 1 GB) holds any floor's
    worth of lines, so no other model's lines are sized."""
    capped = []
    for model in spec.models:
        found = _model_batch_limits(model)
        if found is None or found[0].min_lines <= 1:
            continue
        documented, limits = found
        if limits.max_bytes < documented.max_bytes:
            capped.append(model.name)
    return capped


def _short_batch_cap(model: ModelConfig) -> tuple[BatchLimits, int] | None:
    """A batch model's limits, lowered by its spec, and the least cap every count needs, where
    its cap is below that (`BatchLimits.least_max_lines`); else None."""
    if (found := _model_batch_limits(model)) is None:
        return None
    documented, limits = found
    least = documented.least_max_lines
    return None if limits.max_lines >= least else (limits, least)


def _model_batch_limits(model: ModelConfig) -> tuple[BatchLimits, BatchLimits] | None:
    """A batch model's provider's documented batch limits and those its spec lowers them to
    (`providers.batch_openai.limits_for`); None for a live model or a provider without batch."""
    if model.dispatch != "batch" or (documented := _batch_limits(model.provider)) is None:
        return None
    from providers.batch_openai import limits_for

    return documented, limits_for(model, documented)


def _batch_limits(provider: str) -> BatchLimits | None:
    """The documented batch limits of `provider`'s client, None for one without batch."""
    from providers.batch_bedrock import LIMITS as BEDROCK
    from providers.batch_openai import LIMITS as OPENAI_SHAPED
    from providers.batch_vertex import LIMITS as VERTEX

    return {"bedrock": BEDROCK, "vertex": VERTEX, **OPENAI_SHAPED}.get(provider)


def _name_misread(name: str) -> str | None:
    """Why a model name would be read as something else in the report, or None. Checked for
    a new design only (`check_one_form`): a folder an earlier build ran with one stays
    readable."""
    if name.startswith(FORMULA_STARTS):
        return (
            f"a name not beginning with {', '.join(FORMULA_STARTS)}, not {name!r}: a "
            "spreadsheet opening the report's CSV files runs such a cell as a formula"
        )
    if name.casefold() == TOTAL_ROW:
        return (
            f"a name other than {TOTAL_ROW!r} in any case, not {name!r}: it names the audit's "
            "total row"
        )
    return None


#: What a spreadsheet takes a cell beginning with for a formula (or, `@`, a function).
FORMULA_STARTS = ("=", "+", "-", "@")
#: The audit's row of every model together (`engine.audit`, the report's tables).
TOTAL_ROW = "all"


#: The longest model name: a name is the label of every table row, log line and figure
#: panel (5,000 characters were taken and printed whole in every one of them).
MODEL_NAME_MAX = 100
#: The longest campaign name, in UTF-8 bytes: it names the default run folder (`out/NAME`),
#: and a file system takes at most 255 bytes a name (90 CJK letters are 270).
CAMPAIGN_NAME_MAX = 200
#: Why a new design's name shaped like a credential is refused (not shown: it may be one).
_NAMED_LIKE_A_KEY = (
    "named like a credential (not shown): every table and page shows a name whole, while "
    "the logs mask anything of that shape; if it is a key, it never goes in a spec; either "
    "way, choose another name"
)


def _check_shown_text(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """`name`, `model` and `about`, shown in messages, tables and the report: one line, and
    no invisible format character ("m1" and "m1" + U+200B were taken as two models and read
    as one in every table); `about`, free text, may join emoji or letters."""
    from panels.input_files import has_control, invisible_character  # a spec imports panels

    for key in ("name", "model", "about"):
        value = entry.get(key, "")
        if has_control(value):
            raise SpecError(
                path,
                where + key,
                "one line without control characters (a line break, a tab, a terminal "
                "escape): it is shown in every message, log line and table",
            )
        invisible = invisible_character(value, joiners_in_words=key == "about")
        if invisible is not None:
            raise SpecError(
                path,
                where + key,
                f"text without invisible format characters, not one holding {invisible}: it "
                "is shown in every message, log line and table, where it cannot be seen",
            )


def _model_config(entry: dict[str, Any], path: Path, where: str) -> ModelConfig:
    if entry["provider"] not in PROVIDERS:
        raise SpecError(
            path, where + "provider", f"one of {', '.join(PROVIDERS)}, not {entry['provider']!r}"
        )
    checks: dict[str, Callable[[float], bool]] = {
        "rpm": lambda v: v > 1,
        "tpm": lambda v: v > 1,
        "concurrency": lambda v: 1 <= v <= MAX_CONCURRENCY,
        "temperature": lambda v: 0 <= v <= 2,
        "max_tokens": lambda v: 1 <= v <= MAX_TOKENS,
        "timeout_s": lambda v: v > 0,
        "max_down_s": lambda v: v > 0,
        **{key: (lambda v: 0 <= v <= MAX_PRICE) for key in _PRICE_FIELDS},
        **{key: (lambda v: v >= 1) for key in ("batch_max_lines", "batch_max_bytes",
                                                "batch_max_jobs")},
    }
    for key, ok in checks.items():
        number = _finite(entry[key]) if key in entry else None
        if key in entry and (number is None or not ok(number)):
            raise SpecError(path, where + key, _MODEL_KEYS[key][1])
    if "tpm" in entry and entry.get("max_tokens", 0) >= entry["tpm"]:
        # Each call is charged its prompt and max_tokens against tpm before it is sent (as
        # Azure counts them): a max_tokens of 1e9 (a typo) put the lane's next call to
        # sleep for months. Groq answers such a call 413.
        raise SpecError(
            path, where + "max_tokens",
            f"less than the model's tpm ({entry['tpm']:g}): one reply could use more tokens "
            "than a minute allows",
        )  # fmt: skip
    choices = {
        "response_format": RESPONSE_FORMATS,
        "tokenizer": tuple(TOKENIZERS),
        "token_field": TOKEN_FIELDS,  # `plan` took any, and `run` refused it
    }
    for key, allowed in choices.items():
        if key in entry and entry[key] not in allowed:
            raise SpecError(path, where + key, f"one of {', '.join(allowed)}, not {entry[key]!r}")
    if entry.get("json_mode") and "response_format" in entry:
        raise SpecError(
            path,
            where + "json_mode",
            "json_mode or response_format, not both (response_format already asks for JSON)",
        )
    base_url = entry.get("base_url")
    problem = base_url_problem(base_url) if base_url is not None else None
    if problem is not None:
        raise SpecError(path, where + "base_url", problem)
    for key in ("api_key_env", "base_url_env"):
        env_name = entry.get(key)
        if env_name is not None and not env_name.replace("_", "").isalnum():
            raise SpecError(path, where + key, _MODEL_KEYS[key][1])
        if env_name is not None and looks_like_unprefixed_key(env_name):
            raise SpecError(
                path, where + key,
                f"{_MODEL_KEYS[key][1]}: this one looks like a credential (not shown)",
            )  # fmt: skip
    _check_base_url_env(entry, path, where)
    _check_price_provenance(entry, path, where)
    _check_batch(entry, path, where)
    if "personality" in entry:
        _check_personality(entry, path, where)
    extra = {k: entry[k] for k in _EXTRA_KEYS if k in entry}
    if len(entry.get("about", "")) > ABOUT_MAX:
        raise SpecError(path, where + "about", _MODEL_KEYS["about"][1])
    # `about` is for the report only (it reads the frozen spec): no adapter sees it.
    fields = {
        k: v
        for k, v in entry.items()
        if k not in {*_PRICE_FIELDS, "about", "batch_fallback", *_EXTRA_KEYS}
    }
    fields["batch_fallback_live"] = entry.get("batch_fallback") == "live"
    if "rpm" in fields:
        fields["rpm"] = float(fields["rpm"])
    if "tpm" in fields:
        fields["tpm"] = float(fields["tpm"])
    if "max_down_s" in fields:
        fields["max_down_s"] = float(fields["max_down_s"])
    fields.update({name: entry.get(key) for key, name in _PRICE_FIELDS.items()})
    return replace(ModelConfig(**fields), extra=extra)


def _check_base_url_env(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """`base_url_env` is read by the openai provider alone: elsewhere it was taken and
    ignored, and the requests went to the spec's (or the provider's own) root with the real
    key. A run folder's frozen spec holding one is refused as well: the message says where
    to remove it (an operational key, so the folder resumes without it)."""
    if "base_url_env" in entry and not _takes(entry["provider"], "base_url_env"):
        raise SpecError(
            path, where + "base_url_env",
            "read by provider \"openai\" only (a local server's root chosen at start); "
            "give this provider's root as base_url and remove base_url_env (in a run "
            "folder's spec.toml too)",
        )  # fmt: skip


def _check_sim_base_url(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """A simulated model takes no `base_url`: a run points its sim models at the simulator it
    starts, or at `--sim-url`'s (checked to answer, its faults its own), and the spec's was
    ignored without a word (a `serve-sim` at that URL saw no request). Refused as
    `base_url_env` is, a run folder's frozen spec too: an operational key, so removing it
    resumes the folder."""
    if "base_url" in entry and not _takes(entry["provider"], "base_url"):
        raise SpecError(
            path, where + "base_url",
            "not taken by provider \"sim\": a run starts its own simulator; for one already "
            "running (`dutchbook serve-sim`) remove base_url and run with --sim-url "
            "http://127.0.0.1:PORT (in a run folder's spec.toml too)",
        )  # fmt: skip


def _check_personality(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """A simulated forecaster's `personality` is one the simulator has, and not another
    than the model id already names (the id wins: `personality = "noisy"` beside
    `model = "sim-coherent"` was dropped without a word, and an unknown one was refused
    only after the run had written its folder)."""
    from providers.sim.forecasters import PERSONALITIES, named_personality

    given = entry["personality"]
    if given not in PERSONALITIES:
        raise SpecError(
            path, where + "personality", f"one of {', '.join(PERSONALITIES)}, not {given!r}"
        )
    named = named_personality(str(entry.get("model", "")))
    if named is not None and named != given:
        raise SpecError(
            path,
            where + "personality",
            f"the personality the model id {entry['model']!r} names ({named}), or no "
            f"personality key, not {given!r} (the id decides)",
        )


def _check_batch(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """`dispatch` and `batch_fallback` are one of two words; the bucket a storage URI and
    the role an ARN (issue 13)."""
    for key in ("dispatch", "batch_fallback"):
        allowed = ("live", "batch")
        if key in entry and entry[key] not in allowed:
            raise SpecError(path, where + key, f"'live' or 'batch', not {entry[key]!r}")
    bucket = entry.get("batch_bucket")
    if bucket is not None and not (
        bucket.startswith(("s3://", "gs://")) and len(bucket.split("/")[2]) > 0
    ):
        raise SpecError(path, where + "batch_bucket", _MODEL_KEYS["batch_bucket"][1])
    role = entry.get("batch_role_arn")
    if role is not None and not role.startswith("arn:"):
        raise SpecError(path, where + "batch_role_arn", _MODEL_KEYS["batch_role_arn"][1])
    if (entry.get("dispatch") == "batch" and "max_down_s" in entry
            and entry.get("batch_fallback") != "live"):  # fmt: skip
        # Accepted without a word, it limited nothing: a batch lane polls its jobs and never
        # pauses for a provider down; only its live fallback's lane (`engine.outage`) does.
        raise SpecError(
            path, where + "max_down_s",
            f"model {entry.get('name')!r} is dispatched as batch, whose lane never pauses "
            "while its provider is down (it polls its jobs), so max_down_s would limit "
            "nothing: remove it, or set batch_fallback = \"live\", whose live lane it limits",
        )  # fmt: skip


def _check_price_provenance(entry: Mapping[str, Any], path: Path, where: str) -> None:
    """Batch prices in pairs; `price_date` a real calendar date written YYYY-MM-DD;
    `price_source` one short line (an address first if it is a URL)."""
    batch = [k for k in ("batch_price_in", "batch_price_out") if k in entry]
    if len(batch) == 1:  # half a price would be priced as free: refuse it
        other = "batch_price_out" if batch == ["batch_price_in"] else "batch_price_in"
        raise SpecError(path, where + other, f"required with {batch[0]}: {_MODEL_KEYS[other][1]}")
    day = entry.get("price_date")
    if day is not None:
        try:
            ok = len(day) == 10 and date.fromisoformat(day).isoformat() == day
        except ValueError:
            ok = False
        if not ok:
            raise SpecError(path, where + "price_date", f"a date written YYYY-MM-DD, not {day!r}")
    source = entry.get("price_source")
    if source is None:
        return
    if not source.strip() or len(source) > SOURCE_MAX or "\n" in source or "\r" in source:
        raise SpecError(path, where + "price_source", _MODEL_KEYS["price_source"][1])
    # A source may cite more than one page ("URL (live); batch per URL"): the first word of
    # one that starts with a scheme must be an address with a host.
    address = source.split()[0] if source.startswith(("http://", "https://")) else None
    if address is not None and "." not in (urlsplit(address).hostname or ""):
        raise SpecError(path, where + "price_source", f"a URL with a host, not {address!r}")


def _parse_arms(
    raw: Any, path: Path, arm_names: set[str], model_names: set[str]
) -> tuple[ArmEntry, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "arms", "at least one [[arms]] table")
    arms: list[ArmEntry] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(raw):
        where = f"arms[{i}]."
        if not isinstance(entry, dict):
            raise SpecError(path, f"arms[{i}]", "a table")
        _unknown(entry, _ARM_KEYS, path, where)
        name = _get(entry, "name", str, path, where, "an arm name")
        if name not in arm_names and looks_like_credential(name):  # never quoted below
            raise _holds_credential(path, where + "name")
        if name not in arm_names:
            raise SpecError(
                path,
                where + "name",
                f"an arm from the catalogue, not {name!r} ({_close(name, arm_names)})",
            )
        passes = _get(
            entry, "passes", int, path, where, "an integer >= 1", default=DEFAULT_PASSES
        )
        if passes < 1:
            raise SpecError(path, where + "passes", "an integer >= 1")
        subset = entry.get("models")
        if subset is not None:
            if (
                not isinstance(subset, list)
                or not all(isinstance(m, str) for m in subset)
                or not subset
            ):
                raise SpecError(path, where + "models", "a non-empty list of model names")
            for m in subset:
                _check_declared(m, model_names, path, where)
        # An arm may appear more than once (e.g. 5 passes for one model, 1 for the rest), but a
        # model may meet each arm only once, or its answers would be planned twice.
        for m in subset or sorted(model_names):
            if (name, m) in seen:
                raise SpecError(
                    path, where + "models", f"each model once per arm; {m!r} already has {name!r}"
                )
            seen.add((name, m))
        arms.append(ArmEntry(name=name, passes=passes, models=tuple(subset) if subset else None))
    return tuple(arms)


def _check_declared(name: str, model_names: set[str], path: Path, where: str) -> None:
    """An arm's model `name` one of the `[[models]]` names as written there. A name written in
    another Unicode form than the model's ("café" with U+00E9 for "cafe" + U+0301) is not
    matched for it (a folder may hold both forms as two models): both spellings are shown
    escaped, as "'café' is not" alone read as a refusal of the very name declared."""
    if name in model_names:
        return
    from panels.input_files import composed  # a spec imports panels

    alike = sorted(m for m in model_names if composed(m) == composed(name))
    also = (
        f" ({name!a} here, declared as {' and '.join(ascii(m) for m in alike)}: one name in "
        "two Unicode forms; write it as the [[models]] name is written)"
        if alike
        else ""
    )
    raise SpecError(path, where + "models", f"names declared in [[models]]; {name!r} is not{also}")


def _close(name: str, choices: set[str], otherwise: str | None = None) -> str:
    """The nearest of `choices` to a mistyped `name`, else `otherwise` (else all of them: a
    hint once named a `dutchbook arms` command that does not exist)."""
    import difflib

    folded = [choice for choice in sorted(choices) if choice.casefold() == name.casefold()]
    # difflib weighs a letter's case as any other difference: "FLAKY" was near no "flaky"
    near = folded or difflib.get_close_matches(name, sorted(choices), n=3)
    if near:
        return f"did you mean {', '.join(near)}?"
    return f"one of {', '.join(sorted(choices))}" if otherwise is None else otherwise


#: Names a credential is put under; such a key is refused by name, its value never read.
_CREDENTIAL_KEY = re.compile(
    r"(api_?key|key|(api_|access_|auth_|bearer_)?token|secret(_key)?|password|authorization"
    r"|access_key(_id)?|aws_(secret_access_key|access_key_id|session_token))",
    re.IGNORECASE,
)


def _model_keys(provider: object) -> tuple[set[str], str] | None:
    """The model keys a `provider` model takes, and whose they are: all but other providers'
    (`PROVIDER_KEYS`), which a mistyped key's hint named and `check_keys_read` then refused
    on this model. None for a provider not known (its own refusal follows)."""
    if not isinstance(provider, str) or provider not in PROVIDERS:
        return None
    return {key for key in _MODEL_KEYS if _takes(provider, key)}, f"the keys {provider} models take"


def _takes(provider: str, key: str) -> bool:
    """Whether a `provider` model takes a model `key`: what `_check_provider_keys`,
    `_check_base_url_env` and `_check_sim_base_url` refuse, and a mistyped key's hint leaves
    out."""
    if key == "base_url_env":
        return provider == "openai"
    if key == "base_url":
        return provider != "sim"
    return provider in PROVIDER_KEYS.get(key, (provider,))


def _unknown(
    raw: Mapping[str, Any],
    allowed: set[str],
    path: Path,
    where: str,
    *,
    listed: tuple[set[str], str] | None = None,
) -> None:
    """Refuse a key not in `allowed`, naming the nearest of `listed` and listing them (the
    keys, and what they are), else of `allowed` ("the known keys here")."""
    choices, what = listed or (allowed, "the known keys here")
    for key in raw:
        if key in allowed:
            continue
        if "api_key_env" in allowed and _CREDENTIAL_KEY.fullmatch(key):
            raise SpecError(
                path,
                where + key,
                "not read: a credential never goes in a spec; put it in an environment "
                "variable and give that variable's name as api_key_env",
            )
        hint = _close(key, choices, otherwise="")
        raise SpecError(
            path,
            where + key,
            f"an unknown key; {hint + ' ' if hint else ''}{what}: {', '.join(sorted(choices))}",
        )


def _finite(value: float) -> float | None:
    """`panels.toml_text.finite`: a finite float, or None for an integer too big for one."""
    from panels import toml_text  # here: importing this module should not import numpy

    return toml_text.finite(value)


def _get(
    raw: Mapping[str, Any],
    key: str,
    types: type | tuple[type, ...],
    path: Path,
    where: str,
    expected: str,
    *,
    default: Any = ...,
) -> Any:
    if key not in raw:
        if default is ...:
            raise SpecError(path, where + key, f"required: {expected}")
        return default
    value = raw[key]
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise SpecError(path, where + key, expected)
    return value
