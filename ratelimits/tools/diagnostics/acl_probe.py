"""Asking one primary what it lets this client do (:func:`read_node`): which server and
version answers, as which user, and which of the :func:`~.access_needs.needs` it refuses,
judged by ``ACL DRYRUN`` where the server and user have it, otherwise by running the
commands that change nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ratelimits.engine.store import connection, errors
from ratelimits.tools.diagnostics import acl_needs as access_needs
from ratelimits.tools.diagnostics.acl_needs import Need, label


@dataclass
class NodeAccess:
    """What one primary answered."""

    where: str
    version: str = "unknown"
    server: str = "Redis"
    user: str = "default"
    #: ``function``, ``script`` or ``none``: how the limiter's code can run there.
    runs: str = "none"
    #: Commands refused, each with the reason given.
    refused: dict[str, str] = field(default_factory=dict)
    #: Commands not checked (neither ACL DRYRUN nor a harmless run).
    unchecked: list[str] = field(default_factory=list)
    dry_run: bool = False


def read_node(node: redis.Redis) -> NodeAccess:
    """What ``node`` lets this client do; Redis errors reaching it are raised."""
    found = NodeAccess(where=connection.describe(node))
    try:
        info = node.info("server")
    except redis.ResponseError:  # INFO refused: the version stays unknown
        info = {}
    found.version = str(info.get("valkey_version") or info.get("redis_version") or "unknown")
    valkey = info.get("valkey_version") or info.get("server_name") == "valkey"
    found.server = "Valkey" if valkey else "Redis"
    try:
        found.user = _text(node.execute_command("ACL", "WHOAMI"))
    except redis.ResponseError:
        found.user = _user_of(node)
    needs = access_needs.needs()
    found.dry_run = _judge_dry(node, found, needs)
    if not found.dry_run:
        _judge_by_running(node, found, needs)
    refused = set(found.refused)
    if "FCALL" not in refused:
        found.runs = "function"
    elif not {"EVAL", "EVALSHA"} & refused:
        found.runs = "script"
    return found


def _user_of(node: redis.Redis) -> str:
    return str(node.connection_pool.connection_kwargs.get("username") or "default")


def _judge_dry(node: redis.Redis, found: NodeAccess, needs: Sequence[Need]) -> bool:
    """Judge every need with ``ACL DRYRUN``; False when the server or user cannot."""
    for need in needs:
        try:
            answer = node.execute_command("ACL", "DRYRUN", found.user, need.name, *need.args)
        except redis.ResponseError as e:
            if need is needs[0]:
                return False  # no ACL DRYRUN here, or not for this user
            found.refused[label(need)] = str(e)
            continue
        text = _text(answer)
        if text != "OK":
            found.refused[label(need)] = text
    return True


def _judge_by_running(node: redis.Redis, found: NodeAccess, needs: Sequence[Need]) -> None:
    for need in needs:
        if not need.safe:
            found.unchecked.append(label(need))
            continue
        try:
            node.execute_command(need.name, *need.args)
        except redis.ResponseError as e:
            if errors.is_denied(e):
                found.refused[label(need)] = str(e)
            elif need.name == "FCALL" and str(e).lower().startswith("unknown command"):
                found.refused[label(need)] = "no Functions on this server"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
