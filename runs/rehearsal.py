"""A rehearsal marks its run folder, so that the simulator's answers are never taken for a
model's, nor mixed with them.

`dutchbook run --rehearse` swaps every provider for the local simulator and writes into the
run folder the spec names: `runs/specs/local.toml`'s `out/local` is `make demo-local`'s too.
Nothing in the folder said so. A tester's real run resumed a rehearsal's folder ("58 already
accepted"), asked nothing, and reported the simulator's figures as Gemma's; a rehearsal
resumed a real run's folder and added 37 simulated answers to 21 real ones, exit 0; and a
rehearsal's report page called its answers "a real model's real answers" (the spec's
`about`). Now a rehearsal marks its folder (`REHEARSAL_FILE`) before it asks anything, a run
is refused a folder whose attempts came the other way, and the report says that every
answer came from the simulator.

A folder rehearsed before the mark existed is not known for one.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from providers.types import ModelConfig

#: Present in a run folder whose answers the local simulator gave (`--rehearse`).
REHEARSAL_FILE = "rehearsal.json"
#: What `status` says of such a folder first.
REHEARSAL_NOTE = (
    "A rehearsal (--rehearse): every answer here is the local simulator's, in every "
    "provider's place."
)
#: What `audit` says of such a folder under its title: its latency and token tables name the
#: providers, and read as theirs (a new user's), though the simulator answered in their place.
AUDIT_REHEARSAL_NOTE = (
    f"{REHEARSAL_NOTE.removesuffix('.')}; so are the latencies and tokens below, under the "
    "providers' names."
)


def rehearsed(run_dir: Path) -> bool:
    """Whether `run_dir`'s answers came from a rehearsal (`--rehearse`)."""
    return (run_dir / REHEARSAL_FILE).is_file()


def rehearsal_matters(models: Iterable[ModelConfig]) -> bool:
    """Whether a rehearsal changes who answers: some model is not the simulator's (`sim`),
    which answers either way, so a folder of `sim` models alone is neither marked nor refused."""
    return any(model.provider != "sim" for model in models)


def mixing_refusal(
    run_dir: Path, models: Iterable[ModelConfig], *, rehearse: bool
) -> str | None:
    """Why a run of `models` (a rehearsal if `rehearse`) may not ask anything into `run_dir`:
    a rehearsal changes who answers them and the folder holds attempts made the other way;
    None when it may."""
    if (
        not rehearsal_matters(models)
        or rehearsed(run_dir) == rehearse
        or not _has_attempts(run_dir)
    ):
        return None
    if rehearse:
        return (
            f"{run_dir} holds answers from the models' providers: a rehearsal there would mix "
            "the local simulator's in with them; rehearse into another folder (--out)"
        )
    return (
        f"{run_dir} holds a rehearsal's answers (the local simulator's, --rehearse): a run "
        "there would take them for the models' own; give --out another folder, or resume the "
        "rehearsal with --rehearse"
    )


def mark_folder(run_dir: Path, rehearse: bool) -> None:
    """Mark `run_dir` as a rehearsal's (durably, before anything is asked; after its design
    is frozen, so that a folder holding the mark is a run's: `runs.run_folder`), or clear a
    mark left by a rehearsal that asked nothing (`mixing_refusal` has let this run in)."""
    from engine.durable import write_bytes_atomic

    marker = run_dir / REHEARSAL_FILE
    if not rehearse:
        marker.unlink(missing_ok=True)
    elif not marker.is_file():
        since = datetime.now(UTC).isoformat(timespec="seconds")
        write_bytes_atomic(marker, f'{{"rehearsal": true, "since": "{since}"}}\n'.encode())


def _has_attempts(run_dir: Path) -> bool:
    """Whether anything was asked into `run_dir`: an attempt folded into `attempts/`, a
    journal segment (every live attempt is journaled before it is sent), or a batch job
    (its lines reach the journal only once collected: a rehearsal was let into a folder
    whose real jobs were still at the provider, and polled the simulator for them)."""
    from engine.batch_jobs import JOBS_FILE
    from engine.journal import list_segments
    from engine.scan import ATTEMPTS, JOURNAL
    from engine.shards import list_shards

    if list_shards(run_dir / ATTEMPTS) or _not_empty(run_dir / JOBS_FILE):
        return True
    return any(_not_empty(path) for _, path in list_segments(run_dir / JOURNAL))


def _not_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False
