"""`dutchbook serve-sim`: the provider simulator, standalone, for rehearsing a campaign.

A user points a spec's models at it (or lets `provider = "sim"` models default to it) and
runs the whole pipeline for free before spending money; the counts printed on exit say how
many requests each provider route answered and which faults were injected.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from engine.durable import why_unwritable
from engine.shards import special_file
from providers.sim.credentials import DEFAULT_CREDENTIALS
from providers.sim.faults import PROFILES, parse_faults
from providers.sim.rehearse import BASE_PATHS
from providers.sim.server import COUNTS_PATH, SimHandle, serve_forever
from runs.commands._errors import fail, path_to_write
from runs.output import (
    STDOUT_NAME,
    OutputClosed,
    OutputFull,
    reached_stdout,
    say,
    stdout_console,
    stdout_to_null,
)
from runs.spec import faults_refusal

#: The port a `provider = "sim"` config with no base_url uses (`SIM_DEFAULT_BASE_URL`).
DEFAULT_PORT = 8765


def describe_start(handle: SimHandle, faults: str, console: Console) -> None:
    """What a user needs to point a campaign at the running simulator."""
    console.print(f"dutchbook simulator listening on [bold]{handle.root_url}[/bold]")
    # The profile as parsed: `--faults ',light'` (an empty item, passed over) read
    # "fault profile: ,light".
    console.print(f"fault profile: {parse_faults(faults).name}", markup=False, highlight=False)
    table = Table("provider", "base_url", title="routes (all answers are simulated)")
    for provider, path in BASE_PATHS.items():
        table.add_row(provider, handle.root_url + path)
    console.print(table)
    console.print("OpenAI-shaped routes also serve files and batches, bedrock S3 objects "
                  f"({handle.root_url}/bedrock/s3) and model invocation jobs, vertex Cloud "
                  "Storage and batch prediction jobs (compressed time); counts while running: "
                  f"{handle.root_url}{COUNTS_PATH}", soft_wrap=True)
    console.print("Fake credentials the simulator accepts (never real ones):")
    for line in DEFAULT_CREDENTIALS.export_lines(handle.root_url):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print("Press Ctrl-C to stop.")


def shown(console: Console, show: Callable[[], None], url: Callable[[], str]) -> None:
    """`show()`, printing on stdout. Where stdout cannot take it (its reader gone: `| head -1`,
    which a script reads the URL with; not open for writing; full) the simulator serves on,
    silent on stdout, and writes its counts file when stopped: it stopped there, exit 0 (6
    where full), its counts file never written. Not open for writing or full, or its reader
    gone before the first line (the URL) reached it (`serve-sim | true`: it served on where
    no one could find it), stdout is said so once on stderr, with the URL (`url()`)."""
    if console.quiet:
        return
    try:
        show()
    except (OutputClosed, OutputFull) as exc:
        stdout_to_null()
        console.quiet = True
        if not isinstance(exc, OutputClosed) or not exc.reader_gone or not reached_stdout(console):
            say(f"note: {STDOUT_NAME} cannot be written ({exc.error.strerror or exc.error}); "
                f"the simulator serves on {url()} until Ctrl-C")  # fmt: skip


def describe_stop(counts: dict[str, int], console: Console) -> None:
    table = Table("count", "value", title="simulator counts")
    for key in sorted(counts):
        table.add_row(key, str(counts[key]))
    console.print(table)


def stopped(
    counts: dict[str, int], console: Console, counts_file: Path | None, problems: list[str],
    url: Callable[[], str] = str,  # the simulator's URL, for `shown`'s note ("" unknown)
) -> None:
    """Print the counts and write them to `counts_file`; a write that fails is put in
    `problems`, for one line once the simulator is down (it was a traceback: a file such as
    /proc/version refuses with EIO), a full disk raised for `runs.cli.main` to say."""
    shown(console, lambda: describe_stop(counts, console), url)
    if counts_file is None:
        return
    # Where stdout took no table, the line that says the file refused them gives the counts.
    where = "they are in the table above" if not console.quiet else (
        f"they were: {orjson.dumps(dict(sorted(counts.items()))).decode()}"
    )
    try:
        write_counts(counts_file, counts)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        # A socket refuses with ENXIO too.
        no_reader = exc.errno == errno.ENXIO and special_file(counts_file) == "a FIFO"
        reason = "a named pipe no one reads" if no_reader else _reason(exc)
        problems.append(
            f"--counts-file: the counts could not be written to {counts_file} ({reason}); "
            f"{where}"
        )


def write_counts(counts_file: Path, counts: dict[str, int]) -> None:
    """The counts as JSON, opened without waiting: a named pipe with no reader waited on for
    ever after the stop (a pipe being read, `--counts-file >(jq .)`, is written as before)."""
    data = orjson.dumps(dict(sorted(counts.items())), option=orjson.OPT_INDENT_2)
    fd = os.open(counts_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
    with open(fd, "wb") as handle:
        os.set_blocking(fd, True)
        handle.write(data)


def serve_sim(
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")
    ] = DEFAULT_PORT,
    faults: Annotated[
        str,
        typer.Option(
            help=f"Fault profile ({', '.join(PROFILES)}) or explicit rates, e.g. "
            "'rate_limit=0.05,server_error=0.02,slow_delay_s=3'."
        ),
    ] = "none",
    seed: Annotated[int, typer.Option(help="Seed of the fault sequence.")] = 0,
    rpm: Annotated[
        float | None, typer.Option(help="Enforce this many requests per minute per model.")
    ] = None,
    tpm: Annotated[
        float | None,
        typer.Option(help="Enforce this many tokens (prompt + completion) per minute per model."),
    ] = None,
    retry_after: Annotated[
        float, typer.Option(help="Seconds injected 429s ask clients to wait.")
    ] = 1.0,
    counts_file: Annotated[
        Path | None,
        typer.Option(
            "--counts-file",
            parser=path_to_write,
            help="Also write the final counts (faults injected by kind, requests, limiter "
            "429s) to this JSON file on exit, for scripts reconciling a rehearsal.",
        ),
    ] = None,
) -> None:
    """Run the local provider simulator until Ctrl-C (all answers are simulated)."""
    check_options(faults, rpm, tpm, retry_after, counts_file)
    console = stdout_console()
    listening = False
    problems: list[str] = []
    handles: list[SimHandle] = []

    def url() -> str:
        return handles[0].root_url

    def started(handle: SimHandle) -> None:
        nonlocal listening
        listening = True
        handles.append(handle)
        shown(console, lambda: describe_start(handle, faults, console), url)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                serve_forever(
                    port,
                    faults,
                    seed=seed,
                    rate_limit_rpm=rpm,
                    rate_limit_tpm=tpm,
                    retry_after_s=retry_after,
                    on_start=started,
                    on_stop=lambda counts: stopped(counts, console, counts_file, problems, url),
                )
            )
    except OSError as exc:
        if listening or exc.errno not in _CANNOT_LISTEN:
            raise
        fail(
            f"cannot listen on 127.0.0.1:{port}: {_reason(exc)}; give --port another "
            "(0: any free port)"
        )
    if problems:
        fail(problems[0], code=1)


#: What binding the port fails with: taken (another simulator?), or reserved for root.
_CANNOT_LISTEN = frozenset({errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL})


def _reason(exc: OSError) -> str:
    return os.strerror(exc.errno) if exc.errno is not None else str(exc)


def check_options(
    faults: str,
    rpm: float | None,
    tpm: float | None,
    retry_after: float,
    counts_file: Path | None,
) -> None:
    """Refuse, in one line and before anything listens, an option the simulator would only
    trip over later: with a traceback at start, or (the counts file) on exit, after the
    whole rehearsal it was to count."""
    try:
        parse_faults(faults)
    except ValueError as exc:
        fail(f"--faults: {faults_refusal(exc)}")
    for name, value in (("--rpm", rpm), ("--tpm", tpm)):
        if value is not None and not (math.isfinite(value) and value > 0):
            fail(f"{name}: a positive number, not {value}")
    if not (math.isfinite(retry_after) and retry_after >= 0):
        fail(f"--retry-after: seconds, 0 or more, not {retry_after}")
    if counts_file is not None:
        folder = counts_file.parent
        if counts_file.is_dir():
            fail(f"--counts-file: {counts_file} is a folder; give a file name")
        if not folder.is_dir():
            fail(f"--counts-file: no folder {folder} to write {counts_file.name} in")
        if (reason := why_unwritable(folder)) is not None:
            fail(f"--counts-file: cannot write in {folder} ({reason})")


def register(app: typer.Typer) -> None:
    app.command("serve-sim")(serve_sim)
