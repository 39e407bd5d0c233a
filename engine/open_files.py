"""Open connections within the process's open-file limit (`ulimit -n`).

Each request in flight holds a socket, and a rehearsal's simulator, in the same process,
holds the other end. Many systems start processes with a soft limit of 1,024 files while
allowing far more: at concurrency 5,000 under a limit of 256, every connection past the
limit failed with EMFILE, which the audit then counted as the provider's connection errors
(1,526 retries for 1,400 queries), and the simulator's accept loop printed a traceback for
each. So dispatch first raises the soft limit to the hard one, and if the lanes still ask for
more connections than that allows, caps the pool below it: requests beyond wait for a free
connection rather than fail, and the log says why.
"""

from __future__ import annotations

import resource

#: Files kept for everything but connections: the journal, shards, the plan, logs, the
#: interpreter's own, the figure workers' pipes.
RESERVED_FILES = 128
#: The most the soft limit is raised to when the hard limit is unlimited.
CEILING = 1 << 20


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard limit (where allowed); the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # a kernel cap below the hard limit: keep what we have
            pass
    return CEILING if soft == resource.RLIM_INFINITY else soft


def connection_cap(wanted: int, limit: int) -> int | None:
    """The most connections to allow when `wanted` (every lane's concurrency) would exceed
    `limit` open files; None when it fits. Both ends of a connection may be in this process
    (a rehearsal), so each is counted twice."""
    if 2 * wanted + RESERVED_FILES <= limit:
        return None
    return max(1, (limit - RESERVED_FILES) // 2)
