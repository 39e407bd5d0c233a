"""The `dutchbook` command line: one typer app, one module per command under `runs.commands`.

Commands are registered lazily so that `dutchbook --help` and a light command answer at
once: the table below names each command's module and one-line summary, `--help` lists
the table without importing anything, and only the command being run is imported (its
module's `register(app)` then adds it as usual). To add a command, write
`runs/commands/<module>.py` with `register(app)` and add one line to `COMMANDS`; a test
checks that every summary matches the command's own help.

Keep this module's imports to typer and the standard library: importing it must not pull
in numpy, polars, aiohttp or matplotlib (tests/runs/test_cli_startup.py).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import sys
from typing import Annotated, Any, NamedTuple, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from runs.output import (
    NO_ROOM_ERRNOS,
    STDOUT_NAME,
    OutputClosed,
    OutputCut,
    OutputFull,
    files_written,
    mark_files_written,
    next_step,
    output_error,
    print_text,
    say,
    stdout_to_null,
)
from runs.signals import (
    EXIT_INTERRUPTED,
    exit_interrupted,
    held,
    say_interrupted,
    stops_as_interrupt,
)

try:  # typer 0.2x carries its own copy of click, whose errors its parser raises
    from typer._click import exceptions as click_errors
except ImportError:  # an earlier typer uses click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]

#: command name -> (module under runs.commands, one-line summary shown by `--help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": (
        "check",
        "Score one set of stated probabilities: profit, Dutch book, nearest coherent forecast.",
    ),
    "serve-sim": (
        "serve_sim",
        "Run the local provider simulator until Ctrl-C (all answers are simulated).",
    ),
    "plan": ("plan", "Count queries per model and arm, with estimated tokens and cost."),
    "run": ("run", "Run a campaign into a folder; an interrupted run resumes where it stopped."),
    "status": (
        "status",
        "Show a run's progress: done/planned per model, retries by cause, failures, live or died.",
    ),
    "audit": (
        "audit",
        "Retry attempts by cause, requests given up, latency, tokens and cost, per model.",
    ),
    "reparse": (
        "reparse",
        "Re-parse every kept reply with another parser, without a single API call.",
    ),
    "score": (
        "score",
        "Rebuild forecasts.parquet, scores.parquet and averaged.parquet from the kept answers.",
    ),
    "repair": (
        "score",
        "Write repaired.parquet: each answered set's nearest coherent forecast (Euclidean), "
        "beside the stated probabilities, with the Brier change where outcomes are known.",
    ),
    "report": (
        "report",
        "Write a run's report (summary, leaderboard, figures, report/index.html) from its folder.",
    ),
}

#: Kept for callers that listed the modules (the order is the table's).
COMMAND_MODULES: tuple[str, ...] = tuple(module for module, _ in COMMANDS.values())


def load_command(name: str) -> TyperCommand:
    """Import the command's module and return the click command it registers.

    The stop signals are held during the import (`runs.signals.held`): a Ctrl-C there is
    acted on once it ends, a few tenths of a second later, rather than inside a compiled
    module's initialisation, which orjson's does not survive."""
    with held():
        import orjson  # noqa: F401  (every command uses it; `audit` only later, unheld)

        module = importlib.import_module(f"runs.commands.{COMMANDS[name][0]}")
    holder = typer.Typer()
    module.register(holder)
    for info in holder.registered_commands:  # typer's own class, unless one was chosen
        if info.cls in (None, TyperCommand):
            info.cls = _Command
    command = typer.main.get_group(holder).commands.get(name)
    if not isinstance(command, TyperCommand):
        raise RuntimeError(f"runs.commands.{COMMANDS[name][0]} registers no command {name!r}")
    return command


#: Options a user may reach for by another word, and the one each means: click suggests by
#: spelling alone, and `dutchbook run --budget 5` drew "Possible options: --out".
MEANT = {
    "--budget": "--max-cost", "--cost": "--max-cost", "--max-spend": "--max-cost",
    "--spend": "--max-cost", "--cap": "--max-cost", "--output": "--out", "--dir": "--out",
}  # fmt: skip


def _options_near(given: str, ctx: Any) -> list[str]:
    """The command's options a mistyped `given` may have meant: its `MEANT` one, else those
    near it in spelling, their dashes left out. Click compared them with the dashes, which
    every long option shares: `dutchbook run --bogus x` drew "(Possible options: --out)"."""
    import difflib

    opts = [o for p in ctx.command.get_params(ctx) for o in (*p.opts, *p.secondary_opts)]
    if (meant := MEANT.get(given)) is not None and meant in opts:
        return [meant]  # "Did you mean --max-cost?"
    by_name = {o.lstrip("-"): o for o in opts if o.startswith("--")}
    return [by_name[n] for n in difflib.get_close_matches(given.lstrip("-"), list(by_name))]


def usage_error(exc: click_errors.UsageError) -> NoReturn:
    """A usage error (no such option or command, a bad or missing value) in one line, exit 2,
    as every other error: typer drew a box of five lines around it, after the usage.
    `dutchbook` alone still shows its help (`no_args_is_help`)."""
    if isinstance(exc, getattr(click_errors, "NoArgsIsHelpError", ())):  # click 8.2 on
        raise exc
    from runs.commands._errors import fail

    # A long option's: click suggests none for a short one (-x).
    if isinstance(exc, click_errors.NoSuchOption) and exc.ctx and exc.option_name[:2] == "--":
        exc.possibilities = _options_near(exc.option_name.split("=", 1)[0], exc.ctx)

    where = exc.ctx.command_path if exc.ctx is not None else "dutchbook"
    fail(f"{exc.format_message().rstrip('.')} (see '{where} --help')", exc.exit_code)


#: `ctx.meta` key marking help shown for want of a command (`dutchbook` alone).
_HELP_FOR_NO_ARGS = "dutchbook.help_for_no_args"


class _QuietHelp:
    """A click command or group whose help page, its reader gone (`dutchbook --help | head
    -1`), ends as a command that only reads does (`output_closed`: exit 0, quietly). typer
    prints help through a rich console of its own, which meets the closed pipe by exiting 1
    without a word (`Console.on_broken_pipe`); nothing else in printing help exits 1.

    The help `dutchbook` alone shows is a usage error's (`no_args_is_help`): it exits 2
    whatever became of the help text, where its reader gone (`dutchbook | true`) ended it in
    exit 0, and a full output in exit 6 and "run the same command again"."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:  # type: ignore[attr-defined]
            ctx.meta[_HELP_FOR_NO_ARGS] = True  # typer's own test, which then shows the help
        return super().parse_args(ctx, args)  # type: ignore[misc,no-any-return]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        # A usage error's exit status, or None: the help asked for ends as a reading command.
        status = click_errors.UsageError.exit_code if ctx.meta.get(_HELP_FOR_NO_ARGS) else None
        try:
            super().format_help(ctx, formatter)  # type: ignore[misc]
        except SystemExit as exc:
            if exc.code != 1:
                raise
            output_closed(None, status=status)
        except OSError as exc:  # `--help > /dev/full`: the output is what failed, say so
            error = output_error(exc)
            if not isinstance(error, OutputCut):
                raise
            # `run --help 1</dev/null`: help is read; a full output raised for `main` to say
            output_closed(None, error, status=status)


class _Command(_QuietHelp, TyperCommand):
    """A command whose help, printed to a closed pipe, ends quietly (`_QuietHelp`), and whose
    usage errors name it (`usage_error`)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click_errors.UsageError as exc:
            # The parser's own errors ("requires an argument", "does not take a value") come
            # without a context, and `usage_error` named the top-level --help for them.
            if exc.ctx is None:
                exc.ctx = self.context_class(self, info_name=info_name, parent=parent)
            raise


class LazyGroup(_QuietHelp, TyperGroup):
    """A typer group whose commands are imported only when one of them is run.

    Until then each command is a stub carrying its summary, which is all a listing needs.
    (Typed loosely: typer's click classes live in a private module.)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stubs: set[str] = set()
        for name, (_, summary) in COMMANDS.items():
            if name not in self.commands:
                self.commands[name] = TyperCommand(name, help=summary, short_help=summary)
                self._stubs.add(name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if name in self._stubs:
            command = self.commands[name] = load_command(name)
            self._stubs.discard(name)
        return name, command, rest

    # Ctrl-C while a command is still importing what it needs (the first second of
    # `dutchbook run`), or in a command with no handler of its own, would reach typer, which
    # exits 130 without a word: say what happened. Commands that stop softly turn the
    # interrupt into their own message and exit before it gets here.

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            exit_interrupted()
        except (BrokenPipeError, OutputClosed) as exc:  # `dutchbook plan --bad | head -1`
            output_closed(None, exc)
        except click_errors.UsageError as exc:  # `dutchbook --bogus`
            usage_error(exc)

    def invoke(self, ctx: Any) -> Any:
        mark_files_written(False)  # an earlier command's, in the same process (a test's)
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            exit_interrupted()
        # typer's echo, or `runs.output`'s; a full output ends here once the command's work
        # is finished, else `output_closed` raises it again for `main` to say
        except (BrokenPipeError, OutputClosed, OutputFull) as exc:
            output_closed(ctx.invoked_subcommand, exc)
        except click_errors.UsageError as exc:  # a bad option, argument or command
            usage_error(exc)
        except OSError as exc:
            # A path the user gave that no file can have (a name over 255 bytes): every
            # command checks its paths, but `Path.exists` raises this where it answers False
            # for a missing file, so a check the command has not got ends here, not in a
            # traceback.
            if exc.errno != errno.ENAMETOOLONG:
                raise
            from runs.commands._errors import fail

            fail(f"{exc.filename}: {exc.strerror}; give a shorter name")


app = typer.Typer(
    name="dutchbook",
    help="Label-free coherence scoring of language-model forecasts by Dutch-book LPs.",
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    """`--version`: the installed package's version, which a report's `design.json`
    records as well (say which one made a folder when reporting a problem)."""
    if not asked:
        return
    from runs.version import installed_version

    print_text(f"dutchbook {installed_version() or 'unknown (not installed)'}")
    raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Show the version and exit.", callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    # A callback makes typer build a group even before any command is loaded.
    pass


def main() -> None:
    # Before any command imports polars: its allocator then returns freed pages at once
    # instead of keeping recent garbage resident (runs.memory).
    from runs.memory import return_freed_pages_early

    return_freed_pages_early()
    spell_what_stdout_cannot()
    try:
        with stops_as_interrupt():
            app()
    except SystemExit as exc:
        # typer's own handler: a Ctrl-C that landed in typer's frames, outside the command
        # (`LazyGroup` catches those inside), exits 130 without a word.
        if exc.code == EXIT_INTERRUPTED:
            say_interrupted()  # unless a command said it already
        raise
    except KeyboardInterrupt:  # before typer's own handling began (it builds the command)
        exit_interrupted()
    except OSError as exc:
        if exc.errno not in NO_ROOM_ERRNOS:
            raise
        _no_room(exc, f" to {exc.filename}" if exc.filename else "")
    except OutputFull as exc:  # a print of a command's (runs.output)
        _no_room(exc.error, f" to {STDOUT_NAME}")


#: The commands that write a run folder: their output closing may end them before they finish.
WRITING_COMMANDS = frozenset({"run", "reparse", "score", "repair", "report"})
#: Those whose work is done once their files are written (`runs.output.files_written`):
#: not `run`, whose exit status after its report says how the run ended.
DONE_ONCE_WRITTEN = WRITING_COMMANDS - {"run"}


def output_closed(
    command: str | None,
    error: BrokenPipeError | OutputCut | None = None,
    *,
    finished: bool | None = None,
    status: int | None = None,
) -> NoReturn:
    """The standard output's reader went away (`dutchbook status DIR | head -1`): click
    ended every command so in exit 1 without a word. A command that only reads has nothing
    left to do that anyone reads: exit 0, quietly, as `head` users expect. One that writes a
    run folder and had written all it writes (`runs.output.files_written`: `reparse`,
    `score`, `repair`, `report` print after; `DONE_ONCE_WRITTEN`) lost only the rest of its
    printing: exit 0 too, with a note, where it said to run it again, which changed
    nothing. One stopped part-way says so in one line (exit 1); each is rerun safely. Either
    way stdout is pointed at /dev/null first: what is still buffered for it would fail again
    at exit, in a traceback of Python's own.

    `error`, what the write failed with (None: a reader gone, as rich's quiet exit says it).
    A stdout not open for writing (`1</dev/null`: EBADF, `OutputClosed.reader_gone` False)
    ended every command in a traceback: it ends with the same exit status, but no reader
    chose to stop, so a command that only reads says so too, and the same command again
    fails alike unless its output is one it can write. `finished`, where the command knows
    (`run`, its own ending reached: `runs.commands.run`), in place of `DONE_ONCE_WRITTEN`'s
    rule.

    A full output (`OutputFull`) ends a command whose work is finished as a closed one does,
    but in exit 6, a full disk's (it said "run the same command again", which wrote the same
    files again into the same full output); any other it raises again for `main` to say
    (exit 6, run the same command again, given room), unless `status` is given: the exit
    status of a command that prints nothing else (help shown as a usage error's: 2), which
    stands whatever became of its output."""
    stdout_to_null()
    if finished is None:
        finished = command in DONE_ONCE_WRITTEN and files_written()
    if isinstance(error, OutputFull) and not finished and status is None:
        raise error
    said = _closed_words(error)
    if command not in WRITING_COMMANDS:
        if not said.reader_gone:
            say(f"note: {STDOUT_NAME} {said.what} ({said.why}), so nothing was printed")
        raise SystemExit(status or 0)
    say(
        f"{said.finished_as}: {cut_words(command, error)}; its work is finished and written, "
        f"{_after_it()}"
        if finished
        else f"error: {STDOUT_NAME} {said.what} before `dutchbook {command}` finished "
        f"({said.why}); what it wrote is kept: {said.again} to finish it"
    )
    raise SystemExit(said.finished_status if finished else 1)


def cut_words(command: str, error: BrokenPipeError | OutputCut | None) -> str:
    """"the output (stdout) closed before `dutchbook COMMAND` printed all it had to say (its
    reader ended)", or what else befell it (`error`: not open for writing, no room left): what
    a command whose work was done says of its cut printing, in its own closing line. `run`
    says it after a capped or incomplete ending too (`runs.commands.run`), whose line said
    only the run's, and a log cut part-way ended with no word why."""
    said = _closed_words(error)
    return (
        f"{STDOUT_NAME} {said.what} before `dutchbook {command}` printed all it had to say "
        f"({said.why})"
    )


def _after_it() -> str:
    """What a command whose work is finished says the folder needs: what the command marked
    (`runs.output.next_step`: a reparse's "run `dutchbook score DIR`"), else nothing; it said
    "nothing to run again" after a reparse that left the scores behind the answers."""
    step = next_step()
    if step is not None:
        return f"but {step}"
    return "nothing to run again (`dutchbook status` on the folder says what it needs next)"


class _Closed(NamedTuple):
    """How `output_closed` says what befell the output, why, and what finishes a command."""

    reader_gone: bool = True
    what: str = "closed"
    why: str = "its reader ended"
    again: str = "run the same command again"
    #: The exit status of a command whose work was finished, and the word its line opens with.
    finished_status: int = 0
    finished_as: str = "note"


def _closed_words(error: BrokenPipeError | OutputCut | None) -> _Closed:
    """`_Closed` for `error`: a reader gone, a stdout not open for writing, which the same
    command again would meet as well, or one with no room left."""
    if isinstance(error, OutputFull):
        from runs.commands._errors import EXIT_DISK_FULL  # rich: imported once it is needed

        return _Closed(
            reader_gone=False,
            what="could not be written",
            why=f"no room left for it: {error.error.strerror or error.error}",
            finished_status=EXIT_DISK_FULL,
            finished_as="error",
        )  # no `again`: a command a full output stopped part-way is `main`'s to end
    if error is None or isinstance(error, BrokenPipeError) or error.reader_gone:
        return _Closed()
    return _Closed(
        reader_gone=False,
        what="could not be written",
        why=f"it is not open for writing: {error.error.strerror or error.error}",
        again="run the same command again, its output open for writing,",
    )


def spell_what_stdout_cannot() -> None:
    """A character the output's encoding has not got (a model named in Chinese, on a
    terminal or log in ASCII or Latin-1) is written as a backslash escape, as stderr already
    does: `report` ended in a UnicodeEncodeError at its leaderboard, before writing its
    page, and `status` at its table."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)  # absent on a replaced stdout
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="backslashreplace")


def _no_room(exc: OSError, where: str) -> NoReturn:
    """One line and exit 6 for a write that found no room and that no command turned into
    its own message: above all the output itself (`dutchbook audit DIR > file` on a full
    disk ended in rich's traceback). A run folder's files are replaced whole, so what a
    folder held before is still there. `where` names what was written to (" to FILE"), or is
    empty when the error does not say. A broken pipe (`| head`) never gets here: `LazyGroup`
    ends those (`output_closed`)."""
    from runs.commands._errors import EXIT_DISK_FULL, NO_ROOM_HINT

    try:
        sys.stdout.flush()
    except OSError:
        stdout_to_null()  # the output is what failed
        where = where or f" to {STDOUT_NAME}"  # the output failed; its error names no file
    say(f"error: a write{where} failed: {exc.strerror or exc}; {NO_ROOM_HINT}")
    raise SystemExit(EXIT_DISK_FULL)


if __name__ == "__main__":
    # `python -m runs.cli ...` (no console script on PATH) ran nothing and exited 0, which a
    # script reads as a finished run.
    main()
