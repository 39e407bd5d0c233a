"""What a run folder's plan was built from, and what a resume may change.

A run folder's plan is made once; a resume reuses it and scoring reads the data files again.
So a resume must be of the same *design*, or two designs would be mixed without a word:

- `design.json` records a SHA-256 of every input file the plan was built from (the returns
  and headlines the stock arms read, each family file the family arms read; the embedded
  ones included, so an upgrade that changes the shipped data is caught too) and the
  dutchbook version. A resume whose files differ is refused, naming each changed file.
- the spec's *design* settings (models' identities and sampling options, arms, passes, seed,
  parser, prompts, `stock_days` where an arm reads the returns) may not change on resume;
  its *operational* settings (`OPERATIONAL_MODEL_KEYS`, `OPERATIONAL_TOP_KEYS`) may: a run
  that died of a too-short `timeout_s` can be resumed with a longer one. Every spec a
  folder was run with is kept in `spec-history.jsonl` with the keys that changed;
  `spec.toml` is the one in use.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from engine.console_lines import plural
from engine.durable import write_bytes_atomic
from runs.output import say
from runs.spec import (
    ANCHOR_KEYS,
    DEFAULT_MODEL_OPTIONS,
    DEFAULT_PARSER,
    DEFAULT_PASSES,
    DEFAULT_SEED,
    DEFAULT_STOCK_DAYS,
    CampaignSpec,
    check_one_form,
)
from runs.version import installed_version

if TYPE_CHECKING:
    from runs.units import UnitSource

SPEC_FILE = "spec.toml"
DESIGN_FILE = "design.json"
HISTORY_FILE = "spec-history.jsonl"

#: Model keys a resume may change: how fast and where requests go, and what they cost.
OPERATIONAL_MODEL_KEYS = frozenset(
    {
        "concurrency", "rpm", "tpm", "timeout_s", "base_url", "api_key_env", "price_in",
        "price_out", "base_url_env", "tokenizer", "about",
        # How long a lane waits out its provider's outage: when to give up, not what is asked.
        "max_down_s",
        # What requests cost and where that was read: prices change while a sweep runs.
        "batch_price_in", "batch_price_out", "price_date", "price_source",
        # How queries are sent (issue 13): a job's requests are never asked twice either way.
        "dispatch", "batch_bucket", "batch_role_arn", "batch_fallback", "batch_max_lines",
        "batch_max_bytes", "batch_max_jobs",
    }
)
#: Top-level keys a resume may change: how hard to retry, and when a model counts as covered.
OPERATIONAL_TOP_KEYS = frozenset(
    {"max_attempts", "max_answer_failures", "coverage_floor", "sim_faults"}
)
#: Data keys naming files: compared by the files' contents (`design.json`), not their paths,
#: so a spec moved beside a copy of its data still resumes.
_DATA_PATH_KEYS = frozenset({"returns", "headlines", "families"})


class DesignChanged(RuntimeError):
    """A resume that would mix two designs; the message names what changed."""


# --------------------------------------------------------------------------- spec changes


def spec_changes(old_text: str, new_text: str) -> tuple[list[str], list[str]]:
    """(design keys, operational keys) that differ between two specs, as dotted paths."""
    old_raw, new_raw = tomllib.loads(old_text), tomllib.loads(new_text)
    old, new = _flatten_spec(old_raw), _flatten_spec(new_raw)
    if not (_reads_returns(old_raw.get("arms")) and _reads_returns(new_raw.get("arms"))):
        # They size and place a sample no arm asks; or one spec's arms do and the other's
        # not, and the arms added or removed are named.
        for flat in (old, new):
            for key in _STOCK_DAY_KEYS:
                flat.pop(key, None)
    keys = old.keys() | new.keys()
    changed = _whole_arms(
        sorted(k for k in keys if old.get(k, _ABSENT) != new.get(k, _ABSENT)), old, new
    )
    design = [k for k in changed if not _operational(k)]
    operational = [k for k in changed if _operational(k)]
    return design, operational


_ABSENT = object()
#: The key every arm and every model has, by table: which of them one spec has, the other not.
_WHOLE = {"arms": "models", "models": "name"}


def _whole_arms(changed: list[str], old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """`changed` with an arm or a model added or removed named once, as `arms[<name>]` or
    `models[<name>]`, not by each of its keys (a model's options left out among them)."""
    whole = [
        table
        for key in changed
        for table, _, last in [key.rpartition(".")]
        if _WHOLE.get(table.split("[", 1)[0]) == last and (key in old) != (key in new)
    ]
    return sorted(
        {key for key in changed if key.rsplit(".", 1)[0] not in whole} | set(whole)
    )


def _operational(key: str) -> bool:
    last = key.rsplit(".", 1)[-1]
    if key.startswith("models["):
        return last in OPERATIONAL_MODEL_KEYS
    return key in OPERATIONAL_TOP_KEYS


def _flatten_spec(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys to values; models keyed by name (their order is not a design choice), arms
    as `_flatten_arms` reads them, and the design settings a spec left out at their defaults
    (a tester's `stock_days = 100` written out was refused as "changed: data.stock_days")."""
    flat: dict[str, Any] = dict(_DESIGN_DEFAULTS)
    for key, value in raw.items():
        if key == "arms" and isinstance(value, list) and all(isinstance(a, dict) for a in value):
            flat.update(_flatten_arms(value, _model_names(raw.get("models"))))
        elif key == "models" and isinstance(value, list):
            for model in value:
                table = _model_options(model) if isinstance(model, dict) else {}
                for mkey, mvalue in table.items():
                    flat[f"models[{table.get('name', '?')}].{mkey}"] = mvalue
        elif key == "data" and isinstance(value, dict):
            for dkey, dvalue in value.items():
                if dkey not in _DATA_PATH_KEYS:
                    # An anchor date written 2025-08-15 or "2025-08-15": one design.
                    is_day = isinstance(dvalue, date) and not isinstance(dvalue, datetime)
                    flat[f"data.{dkey}"] = dvalue.isoformat() if is_day else dvalue
        else:
            flat[key] = value
    return flat


#: The arms' unit kinds drawn from the returns (`runs.units.UnitSource.stock_days`).
RETURNS_KINDS = frozenset({"stock-day", "date-pair"})
#: The spec keys only that draw reads (its returns and headlines files are compared by
#: content, and only where an arm reads them: `input_files`).
_STOCK_DAY_KEYS = ("data.stock_days", *(f"data.{key}" for key in ANCHOR_KEYS))


def _reads_returns(arms: Any) -> bool:
    """Whether any arm of a spec's `[[arms]]` is asked of the stock-days drawn from the
    returns: a tester's families-only campaign was refused on resume as "changed:
    data.stock_days", which sizes a sample none of its arms asks. An arm the catalogue does
    not hold (a folder of another build's) is taken to, so its keys are still compared."""
    from panels.arms import ARMS

    if not isinstance(arms, list):
        return True
    names = [arm.get("name") if isinstance(arm, dict) else None for arm in arms]
    return any(name not in ARMS or ARMS[name].unit_kind in RETURNS_KINDS for name in names)


#: The design settings `runs.spec.parse_spec` fills in where a spec leaves them out.
_DESIGN_DEFAULTS: Mapping[str, Any] = {
    "seed": DEFAULT_SEED,
    "parser": DEFAULT_PARSER,
    "data.stock_days": DEFAULT_STOCK_DAYS,
}


def _model_options(model: Mapping[str, Any]) -> dict[str, Any]:
    """A `[[models]]` table with the options it left out at the values its run builds it with:
    `runs.spec.DEFAULT_MODEL_OPTIONS`, and a simulated model's `personality` where its id
    names one (the id decides; `runs.spec` refuses another). A tester's resume writing out
    `json_mode = false` or `personality = "coherent"` beside `model = "sim-coherent"` was
    refused as "changed: models[NAME].json_mode". Where the id names none, a written
    personality is sent in its place (`providers.sim.rehearse`) and answers otherwise, so
    it stays a change, as do `temperature` and `max_tokens`, which have no default."""
    options = {**DEFAULT_MODEL_OPTIONS, **model}
    if options.get("provider") == "sim" and isinstance(options.get("model"), str):
        from providers.sim.forecasters import named_personality

        named = named_personality(options["model"])
        if named is not None:
            options.setdefault("personality", named)
    return options


def _model_names(models: Any) -> list[str]:
    """The `[[models]]` names of a spec's table, as written."""
    if not isinstance(models, list):
        return []
    return [m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)]


def _flatten_arms(arms: list[dict[str, Any]], model_names: list[str]) -> dict[str, Any]:
    """`arms[<name>].models` (the models the arm runs, sorted) and `arms[<name>].passes` of
    each arm by its name (a variant is one: `red-herring/...`), not its place in the list:
    the plan asks each model its arms' queries whatever their order, an arm's `models` left
    out is all the campaign's models and its `passes` left out is one. A tester's arms
    swapped, `passes = 1` or every model listed were each refused as "changed: arms". An arm
    written twice (other models, other passes) is one arm: its passes are one number where
    all its models have it, else each model's."""
    passes_of: dict[str, dict[str, Any]] = {}
    for arm in arms:
        runs = arm.get("models")
        models = runs if isinstance(runs, list) else model_names
        passes = arm.get("passes", DEFAULT_PASSES)
        passes_of.setdefault(str(arm.get("name", "?")), {}).update(
            (str(model), passes) for model in models
        )
    flat: dict[str, Any] = {}
    for name, by_model in passes_of.items():
        counts = {repr(passes) for passes in by_model.values()}
        flat[f"arms[{name}].models"] = sorted(by_model)
        flat[f"arms[{name}].passes"] = (
            next(iter(by_model.values())) if len(counts) == 1 else sorted(by_model.items())
        )
    return flat


# --------------------------------------------------------------------------- input files


def input_files(
    spec: CampaignSpec, keep: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Path]]:
    """(label, path) of every file the plan is built from, labels stable across machines;
    `keep`: the hidden family files read all the same (`hidden_families`)."""
    from panels.arms import ARMS
    from panels.data import EMBEDDED_RETURNS
    from panels.families import FAMILIES_DIR, family_files

    kinds = {ARMS[entry.name].unit_kind for entry in spec.arms if entry.name in ARMS}
    if kinds & RETURNS_KINDS:
        returns = spec.data.returns
        yield ("returns" if returns else EMBEDDED_LABEL), returns or EMBEDDED_RETURNS
        if spec.data.headlines is not None:
            yield "headlines", spec.data.headlines
    if "family" in kinds:
        folder = spec.data.families
        prefix = "families" if folder else SHIPPED_FAMILIES
        for path in family_files(folder or FAMILIES_DIR, keep):
            yield f"{prefix}/{path.name}", path


#: The label of the embedded returns in `design.json`'s files (a user's: "returns").
EMBEDDED_LABEL = "returns (embedded)"
#: The label prefix of the shipped question families in `design.json` (a user's: "families").
SHIPPED_FAMILIES = "families (shipped)"


def fingerprint(spec: CampaignSpec, run_dir: Path | None = None) -> dict[str, Any]:
    """The design record: every input file's path and SHA-256, and the dutchbook version;
    with the hidden family files `run_dir`'s design records (`hidden_families`)."""
    files = {
        label: {"path": str(path), "sha256": input_sha256(label, path)}
        for label, path in input_files(spec, hidden_families(run_dir))
    }
    return {"dutchbook": installed_version() or "unknown", "files": files}


def hidden_families(run_dir: Path | None) -> frozenset[str]:
    """The names of the hidden family files (`.h.toml`) `run_dir`'s `design.json` records:
    an earlier build read every `*.toml` of a families folder, where hidden ones are now
    passed over (`panels.families.family_files`), and a folder it ran with one must still
    resume and score as planned. None without a run folder, a record, or with a damaged one
    (`freeze_design` and `input_changes` say so)."""
    if run_dir is None or not (run_dir / DESIGN_FILE).is_file():
        return frozenset()
    try:
        files = recorded_design(run_dir / DESIGN_FILE).get("files", {})
    except DesignChanged:
        return frozenset()
    names = (label.partition("/")[2] for label in files if label.startswith("families"))
    return frozenset(name for name in names if name.startswith("."))


def folder_units(spec: CampaignSpec, run_dir: Path | None) -> UnitSource:
    """The units of `spec` as `run_dir` reads them: with the hidden family files its design
    records (`hidden_families`), which the run, `score`, `repair` and the plan's writer
    each built alike."""
    from runs.units import UnitSource

    return UnitSource.from_spec(spec, hidden_families(run_dir))


def input_sha256(label: str, path: Path) -> str:
    """The SHA-256 `design.json` records of an input file labelled `label` (`report` compares
    the family files with it), read without waiting: a FIFO among the family files, or as the
    returns (`score --spec`, a resume: hashed before they are read), was opened and waited
    on for a writer for ever, and a device read without end. Anything but a regular file
    is refused as the loaders refuse it (`panels.families.refuse_a_pipe`,
    `panels.data.not_a_file`), from its status before it is opened (a socket cannot be)
    and from the opened file's, the descriptor closed: a folder was wrapped and said
    "Is a directory: 3", the descriptor's number, and the descriptor left open."""
    _refuse_unless_a_file(label, path, path.stat().st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _refuse_unless_a_file(label, path, os.fstat(fd).st_mode)
        handle = open(fd, "rb")  # noqa: SIM115 - owns `fd` from here; closed by `with`
    except BaseException:
        os.close(fd)
        raise
    digest = hashlib.sha256()
    with handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _refuse_unless_a_file(label: str, path: Path, mode: int) -> None:
    from panels.data import DataError, not_a_file
    from panels.families import refuse_a_pipe

    if label.startswith("families"):
        refuse_a_pipe(path, mode)
    elif (why := not_a_file(path, mode)) is not None:
        raise DataError(f"{path}: {why}")


#: The changed files a line names one by one (`said_changes`); past them, it counts.
CHANGES_SHOWN = 5


def said_changes(changed: list[str]) -> str:
    """`changed_files`' phrases in one clause: the first `CHANGES_SHOWN`, then how many more.
    Adding a families folder to a finished folder's spec named every shipped and new file
    with its path: one line of 6.7 KB."""
    shown = "; ".join(changed[:CHANGES_SHOWN])
    more = len(changed) - CHANGES_SHOWN
    return shown + (f"; and {more:,} more input file{'s' if more != 1 else ''}" if more > 0 else "")


def changed_files(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """One phrase per input file that differs between two fingerprints."""
    before, after = _by_input(recorded.get("files", {})), _by_input(now.get("files", {}))
    phrases = []
    for key in sorted(before.keys() | after.keys()):
        if key not in after:
            label, entry = before[key]
            phrases.append(f"{label} ({entry['path']}) is no longer an input")
        elif key not in before:
            label, entry = after[key]
            phrases.append(f"{label} ({entry['path']}) is new")
        elif before[key][1]["sha256"] != after[key][1]["sha256"]:
            label, entry = after[key]
            phrases.append(f"{label} ({entry['path']}) changed")
    return phrases


#: The labels of the shipped inputs, as a spec naming the same files would label them.
_NAMED_AS = {EMBEDDED_LABEL: "returns", SHIPPED_FAMILIES: "families"}


def _by_input(files: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """(label, entry) of each input file, keyed by its label with a shipped input's labelled
    as the spec naming it would (`_NAMED_AS`): a tester's resume naming the shipped families
    folder (`families = ".../panels/families/"`, the very files the run took by default) was
    refused as "families (shipped)/... is no longer an input". Their contents still decide."""
    keyed = {}
    for label, entry in files.items():
        head, slash, tail = label.partition("/")
        keyed[_NAMED_AS.get(head, head) + slash + tail] = (label, entry)
    return keyed


# --------------------------------------------------------------------------- the folder


def check_new_design(spec: CampaignSpec, units: UnitSource, run_dir: Path | None = None) -> None:
    """Refuse a model name, family id or statement id written twice in two Unicode forms
    (`runs.spec.check_one_form`, `panels.families.check_one_form`), a model name the report
    would misread (a formula's first character, `all`), and a family whose control
    has no `exact` value, that has `exact` but is no control, of more than `MAX_STATEMENTS`
    statements, whose statement is impossible or always true, or two of whose statements of
    one text hold in different worlds (`panels.families.check_well_posed`), and a row of the
    headlines file the headline arm reads holding a control character or a bidirectional
    control (every data row, those the window never samples too)
    (`panels.data.check_headline_text`), in a design about to be planned: `dutchbook plan`
    (no `run_dir`), or a run into a folder without a frozen spec. There too, the entries of
    its families folder that are not read as families are said on stderr
    (`not_family_files_note`), the plan going ahead.

    A folder with one is not asked: a resume of another design is refused by
    `freeze_design`, and a folder an earlier build ran with such a pair (its tables show
    both, or such a family) must stay resumable, scorable and reportable, so the loaders take
    them.
    """
    if run_dir is not None and (run_dir / SPEC_FILE).exists():
        return
    from panels.arms import ARMS
    from panels.data import check_headline_text
    from panels.families import FAMILIES_DIR, check_well_posed
    from panels.families import check_one_form as check_families

    check_one_form(spec)
    if spec.data.headlines is not None and any(
        "headlines" in ARMS[entry.name].requires for entry in spec.arms
    ):
        check_headline_text(spec.data.headlines)
    if any(ARMS[entry.name].unit_kind == "family" for entry in spec.arms):
        families = [unit.family for unit in units.families]
        check_families(families)
        check_well_posed(families)
        note = not_family_files_note(spec.data.families or FAMILIES_DIR)
        if note is not None:
            say(note)  # dropped where stderr cannot take it: a note is advice


def not_family_files_note(folder: Path) -> str | None:
    """A `note:` naming the entries of a families folder not read as families
    (`panels.families.not_family_files`), or None: a family saved as `g.json` beside `.toml`
    files was left out without a word, and the campaign planned without it."""
    from panels.families import names_shown, not_family_files

    names = not_family_files(folder)
    if not names:
        return None
    return (
        f"note: {folder} holds {plural(len(names), 'entry', 'entries')} not named *.toml, not "
        f"read as families: {names_shown(names)}; a family file's name must end in .toml"
    )


def freeze_design(spec: CampaignSpec, run_dir: Path) -> bool:
    """Record (first run) or check (resume) the folder's spec and inputs; True on a resume.

    Raises `DesignChanged` naming the spec keys or the files that changed. An allowed,
    operational change is recorded in `spec-history.jsonl` and the new spec becomes
    `spec.toml`. Call with the folder's lock held.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    frozen = run_dir / SPEC_FILE
    now = fingerprint(spec, run_dir)
    if not frozen.exists():
        write_bytes_atomic(run_dir / DESIGN_FILE, orjson.dumps(now, option=orjson.OPT_INDENT_2))
        _record(run_dir, spec, [])
        write_bytes_atomic(frozen, spec.text.encode())
        return False
    old_text = _frozen_spec_text(frozen)
    problem = _design_problem(run_dir, spec, old_text, now)
    if problem is not None:
        raise DesignChanged(problem)
    design_path = run_dir / DESIGN_FILE
    if not design_path.exists():  # a folder made before inputs were recorded: record them now
        write_bytes_atomic(design_path, orjson.dumps(now, option=orjson.OPT_INDENT_2))
    if old_text != spec.text:
        _, operational = spec_changes(old_text, spec.text)
        _record(run_dir, spec, operational)
        write_bytes_atomic(frozen, spec.text.encode())
    return True


def design_matches(spec: CampaignSpec, run_dir: Path) -> bool:
    """Whether `spec` would resume into `run_dir` (`freeze_design` would not refuse it).

    Read-only, so a caller may decide before taking the folder's lock what a resume can
    reuse (the plan's estimate); `freeze_design` checks again under the lock.
    """
    if not (run_dir / SPEC_FILE).exists() or not (run_dir / DESIGN_FILE).exists():
        return False
    try:
        return resume_problem(spec, run_dir) is None
    except (OSError, ValueError):  # unreadable: freeze_design says so
        return False


def resume_problem(spec: CampaignSpec, run_dir: Path) -> str | None:
    """Read-only, why `freeze_design` would refuse to resume `run_dir` with `spec` (another
    design, changed inputs, a damaged record), or None: for a check made before the lock is
    taken (`runs.local_model`, before a model is loaded), which `freeze_design` repeats."""
    frozen = run_dir / SPEC_FILE
    if not frozen.exists():
        return None
    try:
        return _design_problem(
            run_dir, spec, _frozen_spec_text(frozen), fingerprint(spec, run_dir)
        )
    except DesignChanged as exc:
        return str(exc)


def other_design(spec: CampaignSpec, run_dir: Path) -> list[str]:
    """The design keys in which `spec` differs from the spec `run_dir` was run with (none when
    it is that design; its data files may be elsewhere, or corrected). For commands that read
    a folder's answers with a spec given beside it: another design would score them as what
    they were not asked as. `DesignChanged` when the folder's spec is damaged."""
    old_text = _frozen_spec_text(run_dir / SPEC_FILE, otherwise="")
    return spec_changes(old_text, spec.text)[0] if old_text != spec.text else []


def _design_problem(
    run_dir: Path, spec: CampaignSpec, old_text: str, now: Mapping[str, Any]
) -> str | None:
    """Why a resume of `run_dir` with `spec` would mix two designs, or None."""
    design, _ = spec_changes(old_text, spec.text) if old_text != spec.text else ([], [])
    if design:
        return (
            f"{run_dir} was run with a different design; changed: {', '.join(design)} "
            "(only operational settings may change on resume: "
            f"{', '.join(sorted(OPERATIONAL_MODEL_KEYS | OPERATIONAL_TOP_KEYS))}); "
            "resume with the same design, or choose a new folder with --out"
        )
    design_path = run_dir / DESIGN_FILE
    if design_path.exists():
        changed = changed_files(recorded_design(design_path), now)
        if changed:
            return (
                f"{run_dir} was planned from other data: {said_changes(changed)}; put the original "
                "files back to resume, or choose a new folder with --out"
            )
    return None


def _frozen_spec_text(frozen: Path, otherwise: str = "or choose a new folder with --out") -> str:
    """The spec a folder was run with, or `DesignChanged` naming the file if it is damaged
    (a resume used to end in tomllib's traceback); `otherwise`: another way on than putting
    it back, if there is one."""
    try:
        text = frozen.read_text(encoding="utf-8")
        tomllib.loads(text)
    except PermissionError as exc:
        raise DesignChanged(_unreadable(frozen, exc)) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DesignChanged(
            f"{frozen} is damaged ({_brief(exc)}): it is the spec this folder was run with; "
            f"put it back (the text of each version is in {HISTORY_FILE})"
            + (f", {otherwise}" if otherwise else "")
        ) from None
    return text


def data_changes(spec: CampaignSpec, run_dir: Path) -> list[str]:
    """The input files of `spec` that differ from those `run_dir` was planned from (phrases
    of `changed_files`); none when the folder recorded none. `DesignChanged` when its
    record is damaged."""
    return input_changes(spec, run_dir).phrases


class InputChanges(NamedTuple):
    """How `spec`'s input files differ from those a folder was planned from."""

    #: One phrase per file that differs (`changed_files`).
    phrases: list[str]
    #: The family files whose content the folder's design does not record: edited or added
    #: since (a file renamed, its content as it was, is not among them).
    families: frozenset[Path]


def input_changes(spec: CampaignSpec, run_dir: Path) -> InputChanges:
    """`data_changes`, with the family files changed since the run (`InputChanges`); none
    when the folder recorded no input. `DesignChanged` when its record is damaged."""
    design_path = run_dir / DESIGN_FILE
    if not design_path.exists():
        return InputChanges([], frozenset())
    recorded, now = recorded_design(design_path), fingerprint(spec, run_dir)
    planned = {entry["sha256"] for entry in _family_entries(recorded)}
    changed = {Path(entry["path"]) for entry in _family_entries(now)
               if entry["sha256"] not in planned}  # fmt: skip
    return InputChanges(changed_files(recorded, now), frozenset(changed))


def _family_entries(design: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The entry (`path`, `sha256`) of each family file a fingerprint holds."""
    return (entry for label, entry in design.get("files", {}).items()
            if label.startswith("families"))  # fmt: skip


def changed_family_refusal(
    units: UnitSource, changed: frozenset[Path], run_dir: Path
) -> str | None:
    """Why the family files `changed` since `run_dir` was planned (`InputChanges.families`)
    may not be scored, or None: a new design's checks refuse one (`check_new_design`). A
    family edited after its run so that its formulas no longer tie its answers (`not a` made
    a free variable) was scored, with a note, and read coherent whatever its answers; `plan`
    refused the same file. A file as it was when the run was planned is never held to checks
    added since (an earlier build ran it), nor are the others beside a changed one."""
    from panels.families import FamilyError, check_one_form, check_well_posed

    if not changed:
        return None
    families = [unit.family for unit in units.families]
    edited = [family for family in families if family.path in changed]
    unchanged = [family for family in families if family.path not in changed]
    try:
        check_one_form(edited, beside=unchanged)
        check_well_posed(edited)
    except FamilyError as error:
        return (
            f"{error} (the file changed since {run_dir} was planned, and a family file changed "
            "since is held to a new plan's checks; or put back the one the run was planned from)"
        )
    return None


def recorded_design(design_path: Path) -> Mapping[str, Any]:
    """The input files a folder was planned from, or `DesignChanged` naming the file if it is
    damaged (a resume used to end in orjson's traceback)."""
    try:
        recorded: Any = orjson.loads(design_path.read_bytes())
        files = recorded.get("files", {}) if isinstance(recorded, dict) else None
        if not isinstance(files, dict) or not all(
            isinstance(entry, dict) and {"path", "sha256"} <= entry.keys()
            for entry in files.values()
        ):
            raise ValueError("not the record of input files it should hold")
    except PermissionError as exc:
        raise DesignChanged(_unreadable(design_path, exc)) from None
    except (OSError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
        raise DesignChanged(
            f"{design_path} is damaged ({_brief(exc)}): it records the data files this folder "
            "was planned from; put it back, or delete it to resume without that check (the "
            "files in use now are then recorded)"
        ) from None
    return dict(recorded)


def _unreadable(path: Path, exc: PermissionError) -> str:
    """A file of the folder this user may not read: not damaged (a tester's unreadable
    spec.toml and design.json were said to be, with "put it back")."""
    del exc  # always "Permission denied"; said as `runs.damaged_files` says it of a shard
    return f"this user may not read {path}: give it read access, then run the same command again"


def _brief(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _record(run_dir: Path, spec: CampaignSpec, changed: list[str]) -> None:
    line = {
        "at": datetime.now(UTC).isoformat(),
        "spec_sha256": hashlib.sha256(spec.text.encode()).hexdigest(),
        "changed": changed,
        "text": spec.text,
    }
    with (run_dir / HISTORY_FILE).open("ab") as handle:
        handle.write(orjson.dumps(line) + b"\n")


def __getattr__(name: str) -> Any:
    """`NOT_FAMILY_FILES_SHOWN`, documented here before it moved to `panels.families` (with
    the other words on a families folder's entries), still read from this module; loaded
    when asked, as this module loads `panels` nowhere at import."""
    if name == "NOT_FAMILY_FILES_SHOWN":
        from panels.families import NOT_FAMILY_FILES_SHOWN

        return NOT_FAMILY_FILES_SHOWN
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
