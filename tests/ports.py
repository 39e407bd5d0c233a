"""A free TCP port for a test's server, picked where no other test's socket can take it
before the server binds it."""

from __future__ import annotations

import random
import socket

#: Below Linux's ephemeral range (32768-60999 by default), from which the kernel hands out
#: the port of every outgoing connection and every listener bound to port 0. A port taken
#: from that range (as `bind(("127.0.0.1", 0))` gives) could be handed to another test's
#: socket, under xdist, between the pick and the server's bind: "port 36105 is in use" failed
#: a full run once. Picked at random, not by a seeded generator: each worker its own.
PICKED_FROM = range(20_000, 32_000)
_PICKER = random.SystemRandom()


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now, from `PICKED_FROM`."""
    for _ in range(200):
        port = _PICKER.choice(PICKED_FROM)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # in use: another
                continue
            return port
    raise RuntimeError(f"no free port in {PICKED_FROM}")
