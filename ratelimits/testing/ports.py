"""Free ports of 127.0.0.1 for the servers tests start."""

from __future__ import annotations

import random
import socket


def free_port() -> int:
    """A port of 127.0.0.1 free now (the system's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port() -> int:
    """A free port P whose cluster bus port P + 10000 is free too (so P <= 55535)."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        if _is_free(port) and _is_free(port + 10000):
            return port
    raise RuntimeError("no free pair of ports for a cluster node")


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
