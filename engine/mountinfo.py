"""What Linux's `/proc/self/mountinfo` says of the file system holding a folder.

ext4 turned read-only by a file-system error (`errors=remount-ro`) can refuse every write
while `statvfs` reads writable: recent kernels mark it `emergency_ro` in its super options
and leave the superblock's read-only flag alone. Its owner's writes then fail with EROFS,
but another user's write probe fails with EACCES first, so the mount's own words are asked
too. Where there is no mountinfo (not Linux, no /proc), this has no opinion (None).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

#: The mount table of this process's mount namespace (Linux's proc(5)).
MOUNTINFO = Path("/proc/self/mountinfo")
#: Super options (the file system's, not the mount's) that mean it refuses writes: `ro`,
#: and ext4's `emergency_ro`, set by an error under `errors=remount-ro` on recent kernels.
READ_ONLY_SUPER_OPTIONS = frozenset({"ro", "emergency_ro"})
#: How mountinfo writes a space, tab, newline or backslash in a path: `\040`, an octal byte.
_ESCAPED = re.compile(r"\\([0-7]{3})")
#: A line's fields before its optional ones: id, parent, major:minor, root, mount point,
#: mount options; after the optional fields' `-`, the type, the source and the super options.
_FIXED_FIELDS = 6
_AFTER_SEPARATOR = 3


def _unescaped(field: str) -> str:
    return _ESCAPED.sub(lambda found: chr(int(found.group(1), 8)), field)


def _holds(mount_point: str, path: str) -> bool:
    """Whether `path` (absolute, resolved) is at or under `mount_point`, by whole names:
    `/mnt` does not hold `/mntx`."""
    return path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def super_options(
    path: str, mountinfo: str, device: str | None = None
) -> frozenset[str] | None:
    """The super options of the file system holding `path` (absolute, resolved) in the text
    of a mountinfo file: those of a mount of `device` ("major:minor", the file's `st_dev`),
    where one is listed (super options are the file system's, the same on each of its
    mounts); else of the mount whose mount point is the longest that holds `path`, the last
    listed of those mounted on one point (the one on top). By device first, as a mount over
    a parent hides a deeper one that the longest mount point would pick (`/a/b`, then `/a`
    mounted over it: `/a/b/run` is on `/a`'s). None where no mount holds it, or the text is
    not mountinfo's."""
    found: frozenset[str] | None = None
    longest = -1
    for fields, separator in _lines(mountinfo):
        options = frozenset(fields[separator + _AFTER_SEPARATOR].split(","))
        if device is not None and fields[2] == device:
            return options
        mount_point = _unescaped(fields[4])
        if len(mount_point) >= longest and _holds(mount_point, path):
            found, longest = options, len(mount_point)
    return found


def _lines(mountinfo: str) -> Iterator[tuple[list[str], int]]:
    """Each mountinfo line's fields, and where its optional fields end (the `-`): lines that
    are not mountinfo's are left out."""
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", _FIXED_FIELDS)
        except ValueError:  # not a mountinfo line
            continue
        if len(fields) > separator + _AFTER_SEPARATOR:
            yield fields, separator


def super_read_only(folder: Path) -> bool | None:
    """Whether this process's mountinfo says the file system holding `folder` refuses
    writes (`READ_ONLY_SUPER_OPTIONS`); None where it cannot say: no mountinfo to read (not
    Linux), the folder cannot be read (`os.stat`), or no mount in it holds the folder."""
    try:
        text = MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")
        device = os.stat(folder).st_dev
    except OSError:
        return None
    held = f"{os.major(device)}:{os.minor(device)}"
    options = super_options(os.path.realpath(folder), text, held)
    return None if options is None else bool(options & READ_ONLY_SUPER_OPTIONS)


__all__ = ["MOUNTINFO", "READ_ONLY_SUPER_OPTIONS", "super_options", "super_read_only"]
