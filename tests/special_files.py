"""Something other than a regular file put where a file goes, for the tests of the refusals
of devices, FIFOs, sockets and folders (engine.shards, panels, runs.design)."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def put_in_place(path: Path, held_by: str) -> None:
    """`held_by` at `path`: "file" (empty), "folder", "fifo", "socket" (bound, then closed:
    the socket file stays), or a path to link to (a device: "/dev/null")."""
    if held_by == "file":
        path.write_bytes(b"")
    elif held_by == "folder":
        path.mkdir()
    elif held_by == "fifo":
        os.mkfifo(path)
    elif held_by == "socket":
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(path))
    else:
        path.symlink_to(held_by)
