"""What a server is, from its ``INFO server``: Redis or Valkey, and which version.

Valkey reports ``redis_version:7.2.4`` whatever its own version, for clients that test
Redis versions; its own name and version are in ``server_name`` and ``valkey_version``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def server_kind(info: Mapping[str, Any]) -> tuple[str, str]:
    """(``"redis"`` or ``"valkey"``, its own version) of the server whose ``INFO server``
    (or whole ``INFO``) is ``info``."""
    name = str(info.get("server_name") or "redis").lower()
    version = info.get(f"{name}_version") or info.get("redis_version") or "unknown"
    return name, str(version)


def server_name(info: Mapping[str, Any]) -> str:
    """``"valkey-server 9.1.2"``, ``"redis-server 7.0.15"``: the server, truthfully."""
    name, version = server_kind(info)
    return f"{name}-server {version}"
