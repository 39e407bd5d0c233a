"""`dutchbook score DIR` and `dutchbook repair DIR`: rebuild a run's scores, or its Euclidean
repairs, from the answers kept in the folder, without a single call.

Useful after `dutchbook reparse`, after a family file was corrected, or after an interrupted
run. The campaign is the folder's own `spec.toml` unless `--spec` names the original (needed
when its `[data]` paths are relative to where the spec lives).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.console_lines import plural
from runs.commands._errors import (
    EXIT_UNCERTIFIED,
    disk_full_says,
    fail,
    interrupt_says_rerun,
    path_given,
    user_errors,
)
from runs.commands._run_folder import require_run_folder
from runs.folder_lock import folder_held
from runs.output import print_text, say, warn

if TYPE_CHECKING:
    from runs.spec import CampaignSpec
    from runs.units import UnitSource

_SPEC_HELP = "the campaign spec (default: DIR/spec.toml, frozen when the run started)"


@contextlib.contextmanager
def _clean_errors(run_dir: Path) -> Iterator[None]:
    """The user errors of every command, a missing file, one this user may not read, a full
    disk, a damaged file of the folder, and any other error replacing the files written
    (`CommitFailed`: a file mounted over one, "Device or resource busy", ended in a
    traceback): one line each."""
    from engine.durable import CommitFailed

    kinds = (FileNotFoundError, PermissionError, CommitFailed)
    with user_errors(*kinds, folder=run_dir), disk_full_says(run_dir):
        yield


def _planned_folder(run_dir: Path) -> None:
    """Refuse what is not a planned run's folder, before its lock, which would be made in it."""
    from runs.plan_checksums import lost_members

    require_run_folder(run_dir)
    if (lost := lost_members(run_dir)) is not None:
        fail(lost)  # the plan is there: the mend that makes its members again
    if not (run_dir / "plan_members.parquet").exists():
        fail(f"{run_dir} is not a planned run folder (no plan_members.parquet)")


def _load(run_dir: Path, spec_path: Path | None) -> tuple[CampaignSpec, UnitSource]:
    """The campaign to score the folder's answers as, and its units, after saying which of
    its data files differ from those the run was planned from (a corrected file is a reason
    to score again, but the user must know the scores no longer describe the data asked
    about; a family file changed so that a new plan would refuse it is refused,
    `runs.design.changed_family_refusal`), and that its last reparse did not finish, if so
    (`engine.reparse.unfinished_line`). Read under the folder's lock (`_planned_folder`
    first)."""
    from engine.reparse import unfinished_line

    unfinished = unfinished_line(run_dir)
    if unfinished:  # scored as they are, but whose answers they are is not known
        warn(unfinished)
    spec = _frozen(run_dir) if spec_path is None else _given(run_dir, spec_path)
    from runs.design import (
        DesignChanged,
        changed_family_refusal,
        folder_units,
        input_changes,
        said_changes,
    )

    try:
        changed = input_changes(spec, run_dir)
    except DesignChanged as exc:  # design.json is damaged
        fail(str(exc))
    units = folder_units(spec, run_dir)
    if changed.phrases:
        # Loaded before the note: a family file made invalid TOML was said to be "scored
        # against the data as it is now", then refused; so is one a new plan would refuse.
        _load_units(spec, units)
        if (refusal := changed_family_refusal(units, changed.families, run_dir)) is not None:
            fail(refusal)
        say(
            f"note: {run_dir} was planned from other data: {said_changes(changed.phrases)}; "
            "its answers are scored against the data as it is now"
        )
    return spec, units


def _load_units(spec: CampaignSpec, units: UnitSource) -> None:
    """Load the units of every arm scoring reads (`runs.answered_sets.chunks`): the data
    files' errors are raised here, and the loaded units are kept for the scoring."""
    from runs.answered_sets import chunks

    for arm in {chunk.arm.name: chunk.arm for chunk in chunks(spec)}.values():
        units.for_arm(arm, check=False)


def _given(run_dir: Path, spec_path: Path) -> CampaignSpec:
    """The spec given with `--spec`, which must be the folder's design."""
    from runs.design import DesignChanged, other_design
    from runs.spec import load_spec

    spec = load_spec(spec_path)
    try:
        changed = other_design(spec, run_dir)
    except DesignChanged as exc:  # the folder's own spec is damaged
        fail(str(exc))
    if changed:
        fail(
            f"{spec_path} is not the design {run_dir} was run with; changed: "
            f"{', '.join(changed)}; give the spec it was run with, or no --spec to use "
            f"{run_dir / 'spec.toml'}"
        )
    return spec


def _frozen(run_dir: Path) -> CampaignSpec:
    """The folder's own spec; where a `[data]` path in it was relative to the spec's folder
    (the frozen copy cannot resolve it), the error says to give that spec with `--spec`."""
    from runs.spec import SpecError, load_spec

    try:
        return load_spec(run_dir / "spec.toml")
    except SpecError as exc:
        if not exc.key.startswith("data."):
            raise
        fail(
            f"{exc}; [data] paths are relative to the folder of the spec the run was started "
            "with: give that spec with --spec"
        )


def _refuse_lost_answers(
    run_dir: Path, spec: CampaignSpec, command: str, would: str, then: str
) -> None:
    """Exit in one line (status 2, a damaged folder's) when `responses/` lost accepted
    answers whose replies the ledger keeps, or holds answers twice (`runs.lost_answers`):
    scoring or repairing the answers left wrote empty output over a finished run's, exit 0,
    where `dutchbook reparse` rebuilds them without a call; of two copies, scoring read the
    older, a reparse's values replaced by the ones it had changed. So too when the shards
    its scores or repairs were computed from are gone with their replies, and no reparse
    replaced them (`gone_answers_refusal`): `score` wrote 0-row forecasts over the only copy
    of the stated probabilities left, exit 0; and when the folder holds no answer at all
    beside forecasts (or repairs) of answers, the record deleted with the shards
    (`emptied_answers_refusal`). Called with the folder's lock held."""
    from runs.lost_answers import (
        answers_refusal,
        emptied_answers_refusal,
        gone_answers_refusal,
    )

    written = _written_by(command)  # its answers' rows first: forecasts, or repairs
    refusal = answers_refusal(
        run_dir, spec.parser, would=would, then=then,
        gone=lambda: gone_answers_refusal(run_dir, written, would=would, then=then)
        or emptied_answers_refusal(run_dir, written[0], written, would=would, then=then),
    )  # fmt: skip
    if refusal is not None:
        fail(refusal)


def _written_by(command: str) -> list[str]:
    """The files of the run folder `dutchbook <command>` writes (`runs.damaged_files.DERIVED`)."""
    from runs.damaged_files import DERIVED

    return [name for name, writer in DERIVED.items() if writer == f"dutchbook {command}"]


def _refuse_folders_in_place(run_dir: Path, command: str) -> None:
    """A folder where a file `command` writes goes: found only at the swap, after all the
    scoring, it was; said before anything is done."""
    from runs.folder_writes import in_the_way

    for name in _written_by(command):
        if (path := run_dir / name).is_dir():
            fail(in_the_way(path, "a folder where a file goes"))


def score(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder", parser=path_given)],
    spec_path: Annotated[
        Path | None, typer.Option("--spec", help=_SPEC_HELP, parser=path_given)
    ] = None,
) -> None:
    """Rebuild forecasts.parquet, scores.parquet and averaged.parquet from the kept answers."""
    from runs.scoring_step import UncertifiedSet, score_run

    with interrupt_says_rerun(), _clean_errors(run_dir):
        _planned_folder(run_dir)
        # The lock before the spec: a run writing the folder is what its user must hear of,
        # not what a spec read from it lacks (a relative [data] path said "give --spec").
        with folder_held(run_dir, "score"):
            spec, units = _load(run_dir, spec_path)
            _refuse_folders_in_place(run_dir, "score")
            _refuse_lost_answers(
                run_dir,
                spec,
                "score",
                would="scoring now would replace its scores with those of the answers left",
                then="score again",
            )
            try:
                scored = score_run(spec, run_dir, units)
            except UncertifiedSet as exc:  # no file replaced: the answers and old scores kept
                fail(exc.line(run_dir), EXIT_UNCERTIFIED)
    frame = scored.scores
    answered = frame.filter(frame["answered"] > 0)
    print_text(
        f"scored {plural(answered.height, 'answered set')} of {frame.height:,} "
        f"({plural(frame['model'].n_unique(), 'model')}, "
        f"{plural(frame['arm'].n_unique(), 'arm')}): "
        f"{run_dir / 'scores.parquet'}, forecasts.parquet, averaged.parquet"
    )
    _say_stale_repairs(run_dir)


def _say_stale_repairs(run_dir: Path) -> None:
    from runs.scored_from import stale_repairs

    if repairs := stale_repairs(run_dir):
        warn(repairs)


def repair(
    run_dir: Annotated[Path, typer.Argument(metavar="DIR", help="run folder", parser=path_given)],
    spec_path: Annotated[
        Path | None, typer.Option("--spec", help=_SPEC_HELP, parser=path_given)
    ] = None,
) -> None:
    """Write repaired.parquet: each answered set's nearest coherent forecast (Euclidean),
    beside the stated probabilities, with the Brier change where outcomes are known."""
    from runs.repair_step import repair_run

    with interrupt_says_rerun(), _clean_errors(run_dir):
        _planned_folder(run_dir)
        # The lock before the spec: a run writing the folder is what its user must hear of,
        # not what a spec read from it lacks (a relative [data] path said "give --spec").
        with folder_held(run_dir, "repair"):
            spec, units = _load(run_dir, spec_path)
            _refuse_folders_in_place(run_dir, "repair")
            _refuse_lost_answers(
                run_dir,
                spec,
                "repair",
                would="repairing now would write repaired.parquet from the answers left",
                then="repair again",
            )
            summary = repair_run(spec, run_dir, units)
    line = f"repaired {plural(summary.sets, 'answered set')}: {run_dir / 'repaired.parquet'}"
    if summary.with_outcomes:
        line += (
            f"; Brier change over the {summary.with_outcomes:,} with outcomes: mean "
            f"{summary.mean_brier_change:+.5f}, largest {summary.largest_brier_change:+.2g} "
            f"(improved {summary.improved:,})"
        )
    print_text(line)


def register(app: typer.Typer) -> None:
    app.command("score")(score)
    app.command("repair")(repair)
