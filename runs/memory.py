"""Handing freed memory back to the system within and between a run's phases (issue 9).

Dispatch, scoring and the report each build large short-lived frames and arrays. Once they
are garbage, two allocators still keep the pages they lived in, which the sweep's memory
target counts as much as live data:

- polars allocates with its own jemalloc (symbols prefixed `_rjem_`), configured by
  polars to keep freed pages 0.5 s dirty then 1 s "muzzy" (`dirty_decay_ms:500,
  muzzy_decay_ms:1000`), and purged only when that arena allocates again: the scoring's
  chunks and the report's scans follow each other faster than that, so every recent
  query's garbage stayed resident together, and an arena whose thread fell idle kept its
  pages for good. `return_freed_pages_early` sets both to 0 (freed pages go back at once);
  jemalloc reads the option from the environment when polars loads, so the command line
  calls it before importing anything. Measured on the paper-scale folder: `dutchbook score`
  387 -> 339 MB, the report 430 -> 346 MB (own process, before the other changes).
- glibc's malloc (Python objects, numpy arrays, HiGHS, aiohttp) keeps freed chunks in its
  arenas: `malloc_trim(0)` returns every whole free page (`trim_heap`); `release_heap`
  collects garbage first. After a paper-scale dispatch it gives back about 85 of 270 MB.

Neither changes a result: they decide only when freed memory is returned.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import os
import sys
from collections.abc import Callable, Iterator

#: jemalloc's options variable for polars' prefixed build, and what the command line sets.
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
JEMALLOC_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"


def return_freed_pages_early() -> None:
    """Ask polars' jemalloc to return freed pages at once.

    Appended to what the environment holds (jemalloc lets the last setting of an option
    win): a parent process that imported polars passes polars' own defaults down in the
    same variable. Only effective before polars is first imported here (jemalloc reads its
    options once), and inherited by the processes this one starts (the scoring pool).
    """
    if "polars" in sys.modules:
        return
    current = os.environ.get(JEMALLOC_ENV, "")
    if not current.endswith(JEMALLOC_CONF):
        os.environ[JEMALLOC_ENV] = f"{current},{JEMALLOC_CONF}" if current else JEMALLOC_CONF


@contextlib.contextmanager
def imports_frozen() -> Iterator[None]:
    """Leave every object alive now out of the cyclic garbage collector while the body runs.

    Called once a command has imported what it needs: those objects (modules, classes,
    functions: about 80,000 for `dutchbook run`) live as long as the process, yet every full
    collection walked them again, about 20 ms each time on this machine, and a campaign
    runs several (`release_heap` between phases, and the collector's own): the bench's
    46,500-query run spent 272 ms in full collections, 151 ms with its imports frozen. Reference
    counting still frees them; only a cycle among them dying meanwhile would wait for the
    end. Unfrozen afterwards, so a caller running the command in its own process (a test)
    gets its collector back as it was.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def release_heap() -> None:
    """Between phases: collect garbage, then `trim_heap`.

    What survives is not frozen as the imports are: tried, it saved about 70 ms of
    collections a 46,500-query run, but the paper sweep's scoring then peaked at 421 MB
    against 397 without it (one sweep each), dispatch's survivors held past their use."""
    gc.collect()
    trim_heap()


def trim_heap() -> None:
    """Return glibc's whole free pages to the system (a no-op without glibc's malloc_trim)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, looked up once in the symbols already loaded (never through
    `ctypes.util.find_library`, which forks `ldconfig`: a copy of this whole process)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    return trim
