"""Name the damaged Parquet files of a run folder after a read of one of them failed.

polars reports a truncated or overwritten Parquet file as a `ComputeError` ("parquet: File out
of specification ...") without its path, from wherever the read happened, and a bit flipped
in a footer in other words too ("unable to decode the encoded schema stored in ARROW:schema")
or as a panic of its Rust code. A command that meets such an error asks `damage_report` which
files of the folder cannot be read, and tells the user in one line which ones they are and
what, if anything, writes each again. Nothing is claimed damaged unless a file of the folder
is unreadable when read again here: any other error goes on as it was (a bug stays a
traceback). A panic's own message is printed on stderr by polars' Rust code before the error
reaches Python, so the line comes after it; a page whose flipped length has polars ask for
exabytes aborts the process (SIGABRT), which no handler sees. A device, FIFO or socket in a
shard's place (`engine.shards.NotAFileShard`, refused by the shard listing before polars
opens it) is named the same way, never opened here either.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from runs.plan_checksums import PLAN_FILES, REPLAN
from runs.report_folder import REPORT_DIR

#: Files `dutchbook score DIR` (or `repair DIR`) writes again from the kept answers.
DERIVED = {
    "forecasts.parquet": "dutchbook score",
    "scores.parquet": "dutchbook score",
    "averaged.parquet": "dutchbook score",
    "repaired.parquet": "dutchbook repair",
}


def polars_panic(exc: BaseException) -> bool:
    """Whether `exc` is a panic of polars' Rust code (pyo3's `PanicException`), as a bit
    flipped in a Parquet footer can cause: a `BaseException`, which `except Exception` lets
    by. polars is not imported for it: an error raised before it was cannot be its panic."""
    polars = sys.modules.get("polars")
    return polars is not None and isinstance(exc, polars.exceptions.PanicException)


def looks_like_parquet_damage(exc: BaseException) -> bool:
    """polars' error for a Parquet file it cannot decode, or the shard listing's for a device
    or a FIFO in a shard's place (checked before the folder is read). What damage raises, of
    polars' errors: a `ComputeError` (a truncated or overwritten file's "parquet: File out of
    specification ...", a flipped footer bit's "out-of-spec: IPC: ..."), an
    `InvalidOperationError` ("unable to decode the encoded schema stored in ARROW:schema") or
    a panic (`polars_panic`), and any other error naming Parquet. Not a `ColumnNotFoundError`,
    a `SchemaError` or the like, a bug's: the search would read the whole folder again only
    to print its traceback, and might blame a damaged file it did not come from."""
    import polars as pl

    from engine.shards import NotAFileShard

    damage = (NotAFileShard, pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError)
    if isinstance(exc, damage) or polars_panic(exc):
        return True
    return isinstance(exc, pl.exceptions.PolarsError) and "parquet" in str(exc).lower()


def unreadable(path: Path, *, whole: bool = True) -> str | None:
    """Why `path` cannot be read as Parquet, or None: whole (its footer and every page), or
    with `whole=False` its footer alone (schema, row groups), which costs no page's read."""
    import polars as pl

    try:
        if whole:
            pl.read_parquet(path)
        else:
            pl.read_parquet_schema(path)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"polars panicked reading it: {why}" if polars_panic(exc) else why
    return None


def check_footers(paths: Iterable[Path]) -> None:
    """Read each Parquet file's footer, not its pages: raises polars' error for the first one
    truncated or overwritten (what a disk fault or a half-finished copy leaves). Cheap enough
    for every resume: a paper-scale run folder has about 150 shards. A folder named as a
    shard raises `IsADirectoryError` naming it (one line through the commands' error
    handling), where polars said "expanded paths were empty" and `reparse` ended in a
    traceback."""
    import errno

    import polars as pl

    for path in paths:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        pl.read_parquet_schema(path)


def damaged_parquet_files(folder: Path) -> dict[Path, str]:
    """Every Parquet file under `folder` that cannot be read, with polars' reason; a device,
    FIFO or socket under a Parquet file's name (a link to /dev/null, say) with what it is,
    never opened (a FIFO would wait for a writer); a folder under one's name (polars said
    "expanded paths were empty", and `status` and `audit` ended in its traceback).

    Footers first: where one fails (a truncated file, a flipped footer bit), those are named
    and no file is read whole, which at paper scale takes seconds and the largest shard's
    memory. Only where every footer reads are the files read whole, for damage in a page; a
    file damaged so beside one whose footer fails is named once that one is mended."""
    from engine.shards import special_file

    found, regular = {}, []
    for path in sorted(folder.rglob("*.parquet")):
        if (kind := special_file(path)) is not None:
            found[path] = _not_a_file(path, kind)
        elif path.is_dir():
            found[path] = "a folder where a file goes"
        elif path.is_file():
            regular.append(path)
    bad = _unreadable_files(regular, whole=False) or _unreadable_files(regular, whole=True)
    return dict(sorted((found | bad).items()))


def _unreadable_files(paths: Iterable[Path], *, whole: bool) -> dict[Path, str]:
    """`unreadable`'s reason for each of `paths` it finds one for."""
    return {path: why for path in paths if (why := unreadable(path, whole=whole)) is not None}


#: Where a run folder's special files are not looked for: the report is written beside it
#: and swapped in whole (`runs.report_folder`), replacing whatever stood there.
_REPLACED_WHOLE = (REPORT_DIR,)


def special_files(folder: Path) -> dict[Path, str]:
    """Every device, FIFO or socket in `folder`'s tree, with what it is; never opened. Any
    of the folder's files read so (the plan, a journal segment, `logs/lanes.json`) waited for
    ever for a FIFO's writer, deaf to SIGTERM, or read a device (/dev/zero: without end).
    Links to files are followed. A folder it may not list raises `PermissionError` naming
    it; one gone while it looks (a live run compacting) is passed over. About 6 µs a file."""
    from engine.shards import special_file

    found = {}
    for path in _files_of(folder):
        if (kind := special_file(path)) is not None:
            found[path] = _not_a_file(path, kind)
    return dict(sorted(found.items()))


def _files_of(folder: Path) -> Iterator[Path]:
    """The files in `folder`'s tree but `report/`, through a link in place of one of its own
    folders too (a `journal/` linked elsewhere is read as the run's), not through a link
    deeper down (a link up to `/` is not walked)."""
    linked = []
    for top, folders, names in os.walk(folder, onerror=_unless_gone):
        if top == str(folder):
            folders[:] = [name for name in folders if name not in _REPLACED_WHOLE]
            linked = [Path(top, name) for name in folders if Path(top, name).is_symlink()]
        yield from (Path(top, name) for name in names)
    for link in linked:
        for top, _, names in os.walk(link, onerror=_unless_gone):
            yield from (Path(top, name) for name in names)


def _unless_gone(exc: OSError) -> None:
    """`os.walk`'s error for a folder it cannot list: raised, but for one that is gone."""
    if not isinstance(exc, FileNotFoundError):
        raise exc


def special_files_report(folder: Path) -> str | None:
    """`damage_report`'s one line for `special_files`, or None when there are none: asked
    before a command reads the folder (`dutchbook run`'s resume, status, audit, score,
    repair, reparse, report), as no read of such a file ends. A folder of it that may not be
    listed is said the same way: what hides there would be read by name all the same."""
    try:
        found = special_files(folder)
    except OSError as exc:
        where = exc.filename or folder
        return f"cannot look in {where} ({exc.strerror or exc}), a folder of the run {folder}"
    return _report_line(folder, found) if found else None


def _not_a_file(path: Path, kind: str) -> str:
    """What a special file is (`special_file`), and where a link in its place leads."""
    link = f", linked to {os.readlink(path)}" if path.is_symlink() else ""
    return f"not a regular file but {kind}{link}"


def damage_report(folder: Path, exc: BaseException) -> str | None:
    """One line naming the folder's damaged Parquet files and what to do about each, if `exc`
    came from one; None when it did not (no file of the folder is unreadable). For polars'
    `PermissionError`, which names its file cut to its last 88 characters or so, the files
    of the folder this user may not read, in full."""
    if isinstance(exc, PermissionError) and exc.filename is None and folder.is_dir():
        return _not_readable_line(folder, _path_tail(str(exc)))
    if not looks_like_parquet_damage(exc) or not folder.is_dir():
        return None
    from engine.shards import NotAFileShard, special_file

    damaged = damaged_parquet_files(folder)
    # The shard the listing refused, also where the search above does not go (a linked
    # folder): it named the file, so it is said, never polars' traceback.
    if isinstance(exc, NotAFileShard):
        damaged.setdefault(exc.path, _not_a_file(exc.path, special_file(exc.path) or exc.kind))
    return _report_line(folder, damaged) if damaged else None


def _path_tail(message: str) -> str:
    """The end of the path polars' `PermissionError` names: "Permission denied (os error 13):
    ...of/the/file.parquet (set POLARS_VERBOSE=1 to see full path)" keeps only its last
    characters."""
    tail = message.rsplit("): ", 1)[-1].removesuffix(" (set POLARS_VERBOSE=1 to see full path)")
    return tail.removeprefix("...")


def _not_readable_line(folder: Path, tail: str) -> str | None:
    """One line naming the files of `folder`'s tree (but `report/`) whose path ends with
    `tail` and that may not be opened for reading; None when there is none (polars' error was
    of a write, say, to a file that is not there yet: its own message is said)."""
    denied = []
    for path in sorted(_files_of(folder)):
        if not tail or not str(path.absolute()).endswith(tail.removeprefix("./")):
            continue
        try:
            with path.open("rb"):
                pass
        except PermissionError:
            denied.append(str(path))
        except OSError:
            continue  # gone meanwhile, or said otherwise
    if not denied:
        return None
    return (
        f"this user may not read {', '.join(denied)}: give it read access, then run the same "
        "command again"
    )


def _report_line(folder: Path, damaged: dict[Path, str]) -> str:
    """One line naming each damaged file of `folder`, why, and what writes it again."""
    from engine.scan import ATTEMPTS

    # The answers are rebuilt from the replies in attempts/, so only while those read whole.
    replies_whole = not any(path.parent == folder / ATTEMPTS for path in damaged)
    parts = []
    for path, why in damaged.items():
        parts.append(f"{path} ({why}; {_remedy(folder, path, replies_whole)})")
    return f"damaged file{'s' if len(parts) > 1 else ''} in the run folder: " + "; ".join(parts)


def _remedy(folder: Path, path: Path, replies_whole: bool) -> str:
    """What writes `path` again: `score` or `repair` for what they derive; `reparse` for an
    answers shard, whose every answer is rebuilt from the replies kept in `attempts/` (the
    damaged file moved aside first, as reparse reads it; a name not ending `.parquet` is no
    shard and no Parquet file of the folder). A plan file is made again once both are removed
    (`runs.plan_checksums.REPLAN`). Else nothing: a copy, or a new folder. A
    device or FIFO is removed instead, whatever follows: every command refuses the folder
    while one is in it, a renamed one too."""
    from engine.scan import RESPONSES
    from engine.shards import special_file

    if path.parent == folder and path.name in PLAN_FILES:
        return REPLAN  # the frozen design makes the same plan again
    rebuild = DERIVED.get(path.name) if path.parent == folder else None
    then = None
    if path.parent == folder and path.name == REPORT_DIR:  # the report's folder, rebuilt whole
        then = f"`dutchbook report {folder}` writes the report again"
    elif rebuild:
        then = f"`{rebuild} {folder}` writes it again"
    elif path.parent == folder / RESPONSES and replies_whole:
        then = rebuild_answers(folder)
    if special_file(path) is not None:
        then = then or _RESTORE_WHAT_IT_REPLACED
        return f"remove it (it holds none of the run's data), then {then}"
    if then is None:
        return _NOTHING_WRITES_IT
    if rebuild:
        return then
    return f"move it aside (rename it to {path.name}.damaged, say), then {then}"


_RESTORE_WHAT_IT_REPLACED = (
    "run the same command again (restore from a copy the file it took the place of)"
)
_NOTHING_WRITES_IT = (
    "no command writes it again: restore it from a copy, or run the spec into a new folder"
)


def rebuild_answers(folder: Path) -> str:
    """The reparse that rebuilds every answer of `folder` from the replies it keeps."""
    from engine.reparse import parser_in_force
    from runs.audit import spec_parser

    parser = parser_in_force(folder, spec_parser(folder)) or "<the spec's parser>"
    return (
        f"`dutchbook reparse {folder} --parser {parser}` rebuilds the answers from the replies "
        "kept in attempts/, without a call"
    )
