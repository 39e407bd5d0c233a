"""The plan's files' checksums (`plan-checksums.json`): a resume asks what `plan.parquet`
says, so a plan changed on disk since it was written must be refused, not asked.

A tester zeroed 100 bytes of a finished run's `plan.parquet`: polars read it without a word,
444 request ids now held NUL bytes, and the resume paid again for 444 answered queries, exit
0, after which `status` read "accepted 1,874/1,430 (131%)". Parquet carries no checksum
polars checks, and the design (`design.json`) hashes the plan's inputs, not the plan.

The checksums are written before the plan is committed (`runs.planner.PlanWriter.commit`),
so a folder with a plan has them, unless it was planned before they were kept: such a plan
is not checked. A plan made again (after its files are removed) has the same request ids,
as the frozen design makes it from the same spec and files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from engine.durable import write_bytes_atomic

CHECKSUMS_FILE = "plan-checksums.json"
#: The files a plan is, in the order they are committed.
PLAN_FILES = ("plan_members.parquet", "plan.parquet")


def file_sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def record_checksums(run_dir: Path, sums: dict[str, str]) -> None:
    """Keep the plan files' `sums` (name -> sha256), durably, before they are committed."""
    data = orjson.dumps({"format": "dutchbook.plan-checksums/1", "sha256": sums})
    write_bytes_atomic(run_dir / CHECKSUMS_FILE, data)


def plan_damage(run_dir: Path) -> str | None:
    """One line naming the plan files that are not what was written, with what to do; None
    when they are (or no checksum was kept: a folder planned before they were)."""
    path = run_dir / CHECKSUMS_FILE
    if not path.is_file():
        return None
    try:
        sums = orjson.loads(path.read_bytes())["sha256"]
        expected = {name: str(sums[name]) for name in PLAN_FILES}
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        return f"{path} is damaged ({type(exc).__name__}): remove it too; {REPLAN}"
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


#: What mends a damaged plan, whatever the damage (`runs.damaged_files` says it too).
REPLAN = (
    f"remove {' and '.join(PLAN_FILES)}, then run the same command again: the plan is made "
    "again from the folder's spec and files, with the same request ids, and nothing answered "
    "is asked again"
)
