"""What a resume writes in its run folder once dispatch has begun, looked at before it plans.

A resume found a path it writes after dispatch in the way (a file named `report`, a folder
named `scores.parquet` or `logs/phases.jsonl`), or a folder of the run it may not write in
(`logs/`, `responses/`), only when it came to write there: after dispatch, whose answers were
paid for, then ended exit 2 ("bad input, nothing sent") with no scores and no report, or
after planning in polars' words, with no advice. `write_refusal` looks at each of those
paths before anything is planned or sent, and says in one line what stands in the way: a
fixed few paths, whatever the campaign's size.
"""

from __future__ import annotations

import errno
from pathlib import Path

from engine.batch_jobs import JOBS_FILE
from engine.batch_lost import ENGINE_LOG
from engine.durable import write_refused
from engine.lanefile import LANES_FILE
from engine.outage import PAUSES_FILE
from engine.scan import ATTEMPTS, JOURNAL, RESPONSES
from runs.commands._errors import (
    IN_THE_WAY_HINT,
    NO_ACCESS_HINT,
    READ_ONLY_HINT,
    link_to_no_folder,
)
from runs.damaged_files import DERIVED
from runs.phases import PHASES_FILE
from runs.report_folder import REPORT_DIR
from runs.scored_from import SCORED_FROM

#: The run's folders it writes in once dispatch has begun, where they are there already (the
#: run makes those that are not). `report/` is swapped in whole, but one it may not write in
#: is refused at the swap (`runs.report_folder`), as writing in place refused it.
WRITTEN_FOLDERS = (
    LANES_FILE.parent,  # logs/
    Path(JOURNAL),
    Path(ATTEMPTS),  # the ledger's shards, compacted from the journal as dispatch opens it
    Path(RESPONSES),
    JOBS_FILE.parent,  # batches/
    Path(REPORT_DIR),
)
#: The files it writes (replaced whole, or appended to) once dispatch has begun: the logs,
#: what scoring writes (as `dutchbook score` does), and the batch jobs' records.
WRITTEN_FILES = (
    LANES_FILE,
    ENGINE_LOG,
    PHASES_FILE,
    PAUSES_FILE,
    JOBS_FILE,
    *(Path(name) for name, writer in DERIVED.items() if writer == "dutchbook score"),
    Path(SCORED_FROM),
)


def in_the_way(path: Path, what: str) -> str:
    """The line for `path`, `what` ("a folder where a file goes", ...) standing in the way."""
    return f"{path} is {what}: {IN_THE_WAY_HINT}"


def write_refusal(run_dir: Path) -> str | None:
    """One line saying which path the run writes after dispatch is in the way, or which of its
    folders this process may not write in; None when there is none. For an existing run
    folder, itself writable (`runs.pipeline.check_run_folder` asks first)."""
    for folder in WRITTEN_FOLDERS:
        path = run_dir / folder
        if path.is_dir():
            if (refused := write_refused(path)) is not None:
                return _unwritable(run_dir, path, refused)
        elif path.exists() or path.is_symlink():
            return in_the_way(path, _not_a_folder(path))
    for file in WRITTEN_FILES:
        if (path := run_dir / file).is_dir():
            return in_the_way(path, "a folder where a file goes")
    return None


def dangling_folder(run_dir: Path) -> str | None:
    """The line for a folder of the run (`WRITTEN_FOLDERS`) that is a link leading to no
    folder (to nothing, or in a loop), else None: every command reads through them, and a
    `logs/` linked to itself ended `score` and `repair` in a traceback ("Too many levels of
    symbolic links"), `status` in the bare error (a tester's)."""
    for folder in WRITTEN_FOLDERS:
        path = run_dir / folder
        # `report/` is replaced whole by what writes it (`runs.report_folder`), a link too.
        if folder != Path(REPORT_DIR) and path.is_symlink() and not path.is_dir():
            return in_the_way(path, _not_a_folder(path))
    return None


def _not_a_folder(path: Path) -> str:
    """What stands where a folder goes: a file, or a link that leads to no folder."""
    if path.is_symlink():
        return link_to_no_folder(path)
    return "a file where a folder goes"


def _unwritable(run_dir: Path, folder: Path, refused: OSError) -> str:
    """The line for a folder of the run this process may not write in, as the run folder's
    own is said (`runs.pipeline.check_run_folder`), with what to do: give it the access, or,
    on a read-only mount, work on a copy."""
    then = READ_ONLY_HINT if refused.errno == errno.EROFS else NO_ACCESS_HINT
    return f"cannot write in {folder} ({refused.strerror}), a folder of the run {run_dir}; {then}"
