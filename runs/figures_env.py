"""Whether a report draws its figures: `DUTCHBOOK_FIGURES` (`figures_wanted`).

A module of its own, importing nothing of the project's, because both `runs.figures` (which
draws them) and `runs.figure_workers` (which `dutchbook run` starts first thing, and starts
none of where no figure is drawn) read it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

#: The environment variable that leaves the report's figures undrawn: "0" draws none
#: (`figures_wanted`). Drawing them is most of a small campaign's report (about 0.8 s of
#: CPU a report here, matplotlib's layout, whatever the resolution): a sweep read for its
#: numbers, or a test suite that checks a run's other files, need not pay it.
FIGURES_ENV = "DUTCHBOOK_FIGURES"
#: `write_figures`' note where `FIGURES_ENV` left the figures undrawn.
FIGURES_OFF_NOTE = f"figures skipped: {FIGURES_ENV}=0; unset it to draw them"


def figures_wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the report draws its figures: not where `FIGURES_ENV` is "0"; unset, empty
    or "1", as by default. Any other value raises ValueError with the line to say (a
    command checks it before it starts its work: `runs.commands`' run and report)."""
    value = environ.get(FIGURES_ENV, "")
    if value in ("", "1"):
        return True
    if value == "0":
        return False
    raise ValueError(
        f"{FIGURES_ENV}={value!r} is not understood: set it to 0 to write the report "
        "without its figures, or to 1 (or leave it unset) to draw them"
    )
