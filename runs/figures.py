"""The report's figures: what `write_report` calls (see `runs.report_figures` for each one).

`write_figures` draws the eight figures into `report/` (or collects those figure workers
drew, `runs.figure_workers`), writes their manifest
`report/figures.json` (number, key, title, path relative to `report/`, caption, and why a
figure was left out) for the page to read, and returns the summary's `figures` entry: the
historical `profit_brier` (figure 2) and `arms` (figure 4) keys, one key per figure (a path, or null
when left out: the manifest says why), a `note` when no figure at all could be drawn, and
`missing_glyphs`: the characters of the figures' text (a model's name, a family's statements)
that no installed font has, drawn as boxes (also in each such figure's caption).
matplotlib is imported lazily, on the Agg backend (`runs.report_figures._style`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engine.durable import write_bytes_atomic
from runs.figures_env import FIGURES_OFF_NOTE, figures_wanted
from runs.report_folder import FIGURES_MANIFEST as MANIFEST

if TYPE_CHECKING:
    from runs.figure_workers import Drawing

#: `write_figures`' note where matplotlib is not installed.
NO_MATPLOTLIB_NOTE = "figures skipped: matplotlib is not installed (make install adds it)"
#: The summary's historical keys, kept (extend, never rename).
LEGACY_KEYS = {"profit_brier": "leaderboard", "arms": "arms"}
#: The summary's `figures` key for the characters drawn as boxes in any figure ("" for none).
MISSING_GLYPHS = "missing_glyphs"
#: The keys of the summary's `figures` entry that are not a figure's path.
NOT_PATHS = frozenset({"note", MISSING_GLYPHS})


def can_draw() -> bool:
    """matplotlib is installed (found, not imported: figures import it when they draw)."""
    return importlib.util.find_spec("matplotlib") is not None


def write_figures(
    summary: Mapping[str, Any],
    out_dir: Path,
    inputs: Any = None,
    drawing: Drawing | None = None,
) -> dict[str, str | None]:
    """Draw every figure the run's arms allow into `out_dir` (the run folder's `report/`).

    `inputs` (a `runs.report_figures.FigureInputs`) defaults to the run folder above
    `out_dir`. `drawing`, every figure being drawn by figure workers (the same files,
    `runs.figure_workers`), is waited for instead. Without matplotlib, or with
    `DUTCHBOOK_FIGURES=0` (`runs.figures_env`), the report says so in one line and carries on.
    """
    if not figures_wanted():
        return _undrawn(out_dir, FIGURES_OFF_NOTE)
    if not can_draw():
        return _undrawn(out_dir, NO_MATPLOTLIB_NOTE)
    from runs.report_figures import FigureInputs, draw_all

    if drawing is not None:
        figures = drawing.figures()
    else:
        if inputs is None:
            inputs = FigureInputs.from_run(out_dir.parent, summary)
        figures = draw_all(inputs, out_dir)
    manifest = [f.to_json(relative_to=out_dir) for f in figures]
    manifest_bytes = orjson.dumps(manifest, option=orjson.OPT_INDENT_2)
    write_bytes_atomic(out_dir / MANIFEST, manifest_bytes, sync=False)  # whole or absent
    drawn: dict[str, str | None] = {f.key: str(f.path) if f.path else None for f in figures}
    result = {legacy: drawn[key] for legacy, key in LEGACY_KEYS.items()} | drawn
    result["note"] = (
        None if any(f.path for f in figures) else "figures skipped: nothing to draw yet"
    )
    result[MISSING_GLYPHS] = "".join(sorted({c for f in figures for c in f.missing_glyphs}))
    return result


def _undrawn(out_dir: Path, note: str) -> dict[str, str | None]:
    """The summary's `figures` where none is drawn (`note` says why), an earlier report's
    figures and manifest removed from `out_dir`: a report written in place (`report/` a
    link, or holding a mount: `runs.report_folder`) kept them, and its page showed the last
    report's figures under a summary saying none was drawn."""
    from runs.report_figures import figure_files

    for name in [MANIFEST, *figure_files()]:
        (out_dir / name).unlink(missing_ok=True)
    return {key: None for key in LEGACY_KEYS} | {"note": note}


def read_manifest(report_dir: Path) -> list[dict[str, Any]]:
    """The figures of a written report (empty when none were drawn)."""
    path = report_dir / MANIFEST
    if not path.exists():
        return []
    loaded: list[dict[str, Any]] = orjson.loads(path.read_bytes())
    return loaded
