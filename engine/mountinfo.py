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


def super_options(path: str, mountinfo: str) -> frozenset[str] | None:
    """The super options of the mount holding `path` (absolute, resolved) in the text of a
    mountinfo file: the mount whose mount point is the longest that holds it, the last
    listed of those mounted on one point (the one on top). None where none holds it, or the
    text is not mountinfo's."""
    found: frozenset[str] | None = None
    longest = -1
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", _FIXED_FIELDS)
        except ValueError:  # not a mountinfo line
            continue
        if len(fields) <= separator + _AFTER_SEPARATOR:
            continue
        mount_point = _unescaped(fields[4])
        if len(mount_point) >= longest and _holds(mount_point, path):
            found = frozenset(fields[separator + _AFTER_SEPARATOR].split(","))
            longest = len(mount_point)
    return found


def super_read_only(folder: Path) -> bool | None:
    """Whether this process's mountinfo says the file system holding `folder` refuses
    writes (`READ_ONLY_SUPER_OPTIONS`); None where it cannot say: no mountinfo to read (not
    Linux), or no mount in it holds the folder."""
    try:
        text = MOUNTINFO.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    options = super_options(os.path.realpath(folder), text)
    return None if options is None else bool(options & READ_ONLY_SUPER_OPTIONS)


__all__ = ["MOUNTINFO", "READ_ONLY_SUPER_OPTIONS", "super_options", "super_read_only"]
