"""The plan's files' checksums (`plan-checksums.json`): a resume asks what `plan.parquet`
says, so a plan changed on disk since it was written must be refused, not asked; and a
plan that does not hold the folder's answers (`answers_outside_plan`) is not theirs.

A tester zeroed 100 bytes of a finished run's `plan.parquet`: polars read it without a word,
444 request ids now held NUL bytes, and the resume paid again for 444 answered queries, exit
0, after which `status` read "accepted 1,874/1,430 (131%)". Parquet carries no checksum
polars checks, and the design (`design.json`) hashes the plan's inputs, not the plan.

The checksums are written before the plan is committed (`runs.planner.PlanWriter.commit`),
so a folder with a plan has them, unless it was planned before they were kept: such a plan
is not checked. A plan made again (after its files are removed) has the same request ids,
as the frozen design makes it from the same spec and files (with the same dutchbook: another
version may render a prompt differently).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from engine.durable import write_bytes_atomic

CHECKSUMS_FILE = "plan-checksums.json"
FORMAT = "dutchbook.plan-checksums/1"
#: The files a plan is, in the order they are committed.
PLAN_FILES = ("plan_members.parquet", "plan.parquet")


def file_sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def record_checksums(run_dir: Path, sums: dict[str, str]) -> None:
    """Keep the plan files' `sums` (name -> sha256), durably, before they are committed."""
    data = orjson.dumps({"format": FORMAT, "sha256": sums})
    write_bytes_atomic(run_dir / CHECKSUMS_FILE, data)


def plan_damage(run_dir: Path) -> str | None:
    """One line naming the plan files that are not what was written, with what to do; None
    when they are (or no checksum was kept: a folder planned before they were)."""
    path = run_dir / CHECKSUMS_FILE
    if not path.is_file():
        return None
    try:
        kept = orjson.loads(path.read_bytes())
        if kept["format"] != FORMAT:
            raise ValueError(f"format {kept['format']!r}")
        expected = {name: str(kept["sha256"][name]) for name in PLAN_FILES}
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        return f"{path} is damaged ({exc.__class__.__name__}: {exc}): remove it too; {REPLAN}"
    changed = [
        name
        for name in PLAN_FILES
        if (run_dir / name).is_file() and file_sha256(run_dir / name) != expected[name]
    ]
    if not changed:
        return None
    return (
        f"{' and '.join(str(run_dir / name) for name in changed)} "
        f"{'is' if len(changed) == 1 else 'are'} damaged: not what was written (its "
        f"checksum in {CHECKSUMS_FILE} differs), and a resume would ask what it now says; "
        f"{REPLAN}"
    )


def plan_damage_unless_written(run_dir: Path) -> str | None:
    """`plan_damage`, asked before the folder is locked: None while a writer holds the
    folder's lock, whose plan may be half committed (a resume racing a replan read
    "damaged"; the writing commands take the lock next and say the folder is busy, `status`
    reads a live snapshot). A pid file alone is no writer (a copy of a live run's folder)."""
    damaged = plan_damage(run_dir)
    if damaged is None:
        return None
    from engine.runlock import lock_held  # polars, through the records: only on this path

    return None if lock_held(run_dir) else damaged


#: What mends a damaged plan, whatever the damage (`runs.damaged_files` says it too). Only
#: `dutchbook run` plans, so it is named whichever command refused; the frozen design (spec and
#: files) gives the same request ids unless this dutchbook renders the prompts differently
#: from the one that planned the folder.
REPLAN = (
    f"remove {' and '.join(PLAN_FILES)}, then resume with `dutchbook run SPEC --out DIR` "
    "(the spec the folder was run with): it plans again from the folder's frozen spec and "
    "files, to the same request ids with the same dutchbook, so nothing answered is asked again"
)


def lost_plan(run_dir: Path) -> str | None:
    """A line saying the folder's `plan.parquet` is gone while what it planned was asked:
    `status` knew no planned counts (a finished run read "stopped", without a word why) and
    the audit counted only the requests it found asked. None when the plan is there (or a
    link to nothing, a damage said otherwise), or nothing was asked (a run killed while it
    planned). A resume plans it again (`dutchbook run` plans where no plan is). A plan whose
    members are gone is said too (`lost_members`)."""
    plan = run_dir / PLAN_FILES[1]
    if plan.exists() or plan.is_symlink():
        return lost_members(run_dir)
    asked = [run_dir / name for name in (PLAN_FILES[0], "attempts", "journal")]
    if not any(path.is_file() or (path.is_dir() and any(path.iterdir())) for path in asked):
        return None
    return f"{plan} is missing, so what the run planned is not counted: {_replans(run_dir, 'it')}"


def lost_members(run_dir: Path) -> str | None:
    """A line saying `plan_members.parquet` is gone while `plan.parquet` is there (removed by
    hand, or left out of a copy), with the mend: remove the plan too, and a resume plans both
    again. The run's dispatch and its scoring, `score` and the report read both: a resume
    asked (and paid for) the queries it had left, then ended in "No such file or directory",
    exit 2, on every rerun, while `status` and `audit` said nothing. None with both there,
    or no plan (`lost_plan` says that). The plan's files are committed members first
    (`PLAN_FILES`), and removed plan first, so no writer leaves a folder so."""
    members, plan = (run_dir / name for name in PLAN_FILES)
    if members.exists() or members.is_symlink() or not plan.exists():
        return None
    return (
        f"{members} is missing while {plan} is there, and every reader of the plan needs both: "
        f"remove {plan} too, then {_replans(run_dir, 'both')}"
    )


def _replans(run_dir: Path, what: str) -> str:
    """The resume that plans `what` (the plan's files) again, and why that is safe."""
    return (
        f"resume with `dutchbook run SPEC --out {run_dir}` (the spec the folder was run with), "
        f"which plans {what} again from the folder's frozen spec and files, to the same request "
        "ids, so nothing answered is asked again"
    )


def answers_outside_plan(run_dir: Path, *, planned_now: bool) -> str | None:
    """One line when accepted answers are for requests `plan.parquet` does not hold, else
    None. The plan a folder's answers were asked from holds every one of their ids; one that
    does not (planned again by a dutchbook that renders a prompt differently, or changed on
    disk in a folder planned before checksums were kept) would ask their queries again under
    new ids, and pay for each. A plan this process made (`planned_now`) is removed before the
    line is said, so the folder is left as it was found and the advice works."""
    import polars as pl

    from engine.scan import scan_responses

    plan = pl.scan_parquet(run_dir / "plan.parquet").select("request_id")
    outside = (
        scan_responses(run_dir, ["request_id"]).join(plan, on="request_id", how="anti")
        .select(pl.len()).collect().item()
    )  # fmt: skip
    if not outside:
        return None
    if planned_now:
        for name in (*reversed(PLAN_FILES), CHECKSUMS_FILE):  # the plan first: none half left
            (run_dir / name).unlink(missing_ok=True)
        mend = "the plan just made was removed again; resume"
    else:
        mend = f"remove {' and '.join(PLAN_FILES)}, then resume"
    return (
        f"{outside:,} accepted answer{'s are' if outside != 1 else ' is'} for requests "
        f"{run_dir / 'plan.parquet'} does not hold: it is not the plan they were asked from, "
        f"and a resume would ask their queries again under new ids; {mend} with "
        f"`dutchbook run SPEC --out DIR` under the dutchbook that planned the folder "
        f"({_planned_by(run_dir)}), which plans their ids again"
    )


def _planned_by(run_dir: Path) -> str:
    """The dutchbook version `design.json` names, in words."""
    try:
        version = orjson.loads((run_dir / "design.json").read_bytes()).get("dutchbook")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        version = None
    return f"version {version}, as design.json says" if version else "design.json names it"
