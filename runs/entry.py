"""The `dutchbook` console script: the stop signals are caught before the CLI is imported.

Importing the CLI (typer and what it brings) takes about a fifth of a second. A Ctrl-C in it
ended in an import's traceback, and a SIGTERM or a hangup killed the process without a word
(7 of 20 Ctrl-Cs sent in the first 0.3 s of `dutchbook check`). So `main` first holds
Ctrl-C, SIGTERM and a hangup back, with nothing imported but `signal` (built in, loaded
with the interpreter), then makes SIGTERM and a hangup raise `KeyboardInterrupt` as Ctrl-C
does (`runs.signals.stops_as_interrupt`), imports the CLI, and lets them through: one that
came meanwhile is acted on then, as one line and exit 130. Python's own start-up, before
this module runs (the `site` module, an editable install's finder), is not ours to guard.
"""

from __future__ import annotations

import signal

#: What `main` holds back until the CLI is imported (`runs.signals.STOP_SIGNALS`; spelled
#: here so that nothing but `signal` is imported before they are held).
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def main() -> None:
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    except (AttributeError, OSError, ValueError):  # no signal masks here: run as is
        before = None
    standard_fds_opened()
    from runs.signals import exit_interrupted, stops_as_interrupt

    try:
        with stops_as_interrupt():
            try:
                from runs import cli
            finally:
                if before is not None:  # a signal held meanwhile is acted on here
                    signal.pthread_sigmask(signal.SIG_SETMASK, before)
            cli.main()  # it handles its own interrupts from here on
    except KeyboardInterrupt:
        exit_interrupted()


def standard_fds_opened() -> None:
    """Open /dev/null on each of the standard descriptors (0-2) the command was started
    without (`2>&-`): else the first file it opens takes that number, and what a child
    process (a figure worker, the scoring pool, a model server) or C code writes to its
    stderr lands in that file (a lock, a log, a shard being written)."""
    import os  # loaded with the interpreter: nothing new is imported before the CLI
    import sys

    streams = ("stdin", "stdout", "stderr")
    for fd, name in enumerate(streams):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: `fd` itself
            except OSError:  # no /dev/null to open: as it was
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            os.set_inheritable(fd, True)  # `os.open`'s are not: a child would find it closed
            if getattr(sys, name) is None:  # Python set it so at start: a print failed on it
                setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115


__all__ = ["main", "standard_fds_opened"]

if __name__ == "__main__":  # `python -m runs.entry ...`, as the `dutchbook` script runs it
    main()
