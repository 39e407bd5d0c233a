"""A plain progress line for a console that is not a terminal (dispatch's and planning's),
written so it can never stop the work it reports on, and the durations such lines show.

The lines go to the command's own output, which may be a pipe its reader closed (`run ... |
head`) or a file on a full disk. Printed through rich, a closed pipe became `SystemExit`
inside the event loop and ended a run mid-dispatch with a page of tracebacks; a full disk
stopped the task that also keeps `logs/lanes.json` current. A line that cannot be written is
dropped, and the caller writes no more; the command's own next print says what failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def duration(seconds: float | None) -> str:
    """`m:ss`, or `h:mm:ss` from an hour on; `?` when not known."""
    if seconds is None:
        return "?"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def write_line(console: Console, line: str) -> bool:
    """Write `line` and a line break to the console's file, flushed; False when that failed."""
    try:
        console.file.write(line + "\n")
        console.file.flush()
    except Exception:  # any failure here is the output's, never the work's
        return False
    return True
