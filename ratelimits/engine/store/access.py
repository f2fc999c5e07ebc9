"""What the limiter's Redis lets this client do, for ``manage.py check --deploy``.

Connects (with the limiter's settings: address, credentials, TLS), then on each primary
asks which server and version answers, and whether this user may run what the limiter,
the management command and the admin send (:data:`LIMITER`, :data:`TOOLS`):

- with ``ACL DRYRUN`` (Redis 7+, Valkey) where the user may run it: every command, with
  a key under ``KEY_PREFIX``, is judged by the server's ACL without running;
- otherwise by running the commands that change nothing (``FCALL`` and ``FCALL_RO`` of
  a function that does not exist, ``EVALSHA`` of a script that does not exist, reads of
  a key that does not exist): ``NOPERM`` says refused. The commands that write are then
  not checked. The tools' looks (``inspect``, ``keys``, the admin) are ``FCALL_RO``.

A failure to connect is told apart: the credentials refused, a TLS handshake failed,
or no answer at all (which the eviction check, W031, reports too).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ratelimits.conf import app_settings
from ratelimits.engine.keys import version_key
from ratelimits.engine.store import commands, connection, errors, scripts

#: Seconds the check waits for each Redis server.
TIMEOUT = 2.0


@dataclass(frozen=True)
class Need:
    """A command someone sends, as ``ACL DRYRUN`` takes it; ``safe``: it can be run to
    see whether it is refused (it changes nothing)."""

    who: str
    name: str
    args: tuple[str, ...]
    safe: bool = True


@dataclass
class Finding:
    """One result: ``level`` is ``info``, ``warning``; ``code`` the check id's number."""

    level: str
    code: str
    message: str
    hint: str = ""


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


def _needs() -> tuple[Need, ...]:
    prefix = app_settings.KEY_PREFIX
    key = f"{prefix}:{{deploy-check}}:probe"
    stamp = version_key(prefix)
    sha = commands.script_sha()
    missing_sha = "0" * 40
    return (
        Need("limiter", "FCALL", ("ratelimits_deploy_check_none", "1", key)),
        Need("limiter", "FUNCTION", ("LOAD", scripts.library_source()), safe=False),
        Need("limiter", "EVALSHA", (missing_sha, "1", key)),
        Need("limiter", "EVAL", ("return 0", "1", key)),
        Need("limiter", "GET", (stamp,)),
        Need("limiter", "SET", (stamp, "x", "NX"), safe=False),
        Need("limiter", "HINCRBY", (key, "field", "1"), safe=False),
        Need("limiter", "EXPIRE", (key, "60")),
        Need("tools", "FCALL_RO", ("ratelimits_deploy_check_none", "1", key)),
        Need("tools", "SCAN", ("0", "MATCH", f"{prefix}:*", "COUNT", "1")),
        Need("tools", "TYPE", (key,)),
        Need("tools", "PTTL", (key,)),
        Need("tools", "EXISTS", (key,)),
        Need("tools", "HGETALL", (key,)),
        Need("tools", "ZRANGE", (key, "0", "-1")),
        Need("tools", "MEMORY", ("USAGE", key)),
        Need("tools", "UNLINK", (key,)),
        Need("tools", "DBSIZE", ()),
        Need("tools", "TIME", ()),
        Need("tools", "INFO", ("memory",)),
        Need("tools", "SCRIPT", ("EXISTS", sha)),
        Need("tools", "SCRIPT", ("LOAD", scripts.decide_source()), safe=False),
    )


def label(need: Need) -> str:
    """``FCALL``, ``MEMORY USAGE``: a command as people write it."""
    sub = need.args[0] if need.name in ("FUNCTION", "SCRIPT", "MEMORY") and need.args else ""
    return f"{need.name} {sub}".strip()


def connect_failure(error: BaseException) -> Finding:
    """The finding for a client that could not reach the server (``error``)."""
    text = f"{type(error).__name__}: {error}"
    try:
        where = connection.where()
    except Exception:  # only for the message
        where = "the configured address"
    if _is_auth(error):
        return Finding(
            "warning",
            "W032",
            f"Redis at {where} refused the limiter's credentials ({text}): every "
            "request gets its policy's fail mode.",
            "Check the user name and password: the cache's LOCATION (or its OPTIONS "
            "PASSWORD), or RATELIMITS['CLUSTER_NODES'] / ['CLUSTER_OPTIONS']. See "
            "docs/redis.md.",
        )
    if _is_tls(error):
        return Finding(
            "warning",
            "W033",
            f"The TLS connection to Redis at {where} failed ({text}): every request gets "
            "its policy's fail mode.",
            "Give the client the CA that signed the server's certificate (ssl_ca_certs in "
            "the cache's CONNECTION_POOL_KWARGS, or RATELIMITS['CLUSTER_OPTIONS']), and "
            "its own certificate if the server asks for one (ssl_certfile, ssl_keyfile); "
            "rediss:// for a TLS port, redis:// for a plain one. See docs/redis.md.",
        )
    return Finding(
        "warning",
        "W033" if _maybe_tls_port(error) else "W034",
        f"Redis at {where} did not answer the limiter's client ({text})"
        + (
            ": the server closed the connection at once, as a TLS port does to a client "
            "that does not speak TLS."
            if _maybe_tls_port(error)
            else "."
        ),
        "If that port serves TLS, write rediss:// (and give the CA: docs/redis.md); "
        "otherwise check the address, the firewall, and that Redis runs."
        if _maybe_tls_port(error)
        else "Check the address, the firewall, and that Redis runs.",
    )


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return found


def _is_auth(error: BaseException) -> bool:
    for link in _chain(error):
        if isinstance(link, errors.CREDENTIALS_REFUSED):
            return True
        text = str(link).upper()
        if any(word in text for word in ("WRONGPASS", "NOAUTH", "INVALID USERNAME-PASSWORD")):
            return True
        if "INVALID PASSWORD" in text or "AUTHENTICATION REQUIRED" in text:
            return True
    return False


def _is_tls(error: BaseException) -> bool:
    for link in _chain(error):
        if isinstance(link, ssl.SSLError):
            return True
        text = str(link)
        if any(word in text for word in ("SSL", "CERTIFICATE", "certificate", "TLS")):
            return True
    return False


def _maybe_tls_port(error: BaseException) -> bool:
    text = " ".join(str(link) for link in _chain(error))
    return "Connection closed by server" in text or "reset by peer" in text


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
    needs = _needs()
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


_SCRIPTING = frozenset({"FCALL", "FUNCTION LOAD", "EVALSHA", "EVAL"})


def findings(node: NodeAccess) -> list[Finding]:
    """The info line for ``node``, and its warnings."""
    how = {
        "function": "runs the limiter's code as a Function (FCALL)",
        "script": "runs the limiter's code as a script (EVALSHA)",
        "none": "lets this user run none of the limiter's code",
    }[node.runs]
    judged = "ACL DRYRUN" if node.dry_run else "harmless calls"
    found = [
        Finding(
            "info",
            "I036",
            f"{node.server} {node.version} at {node.where}, user {node.user!r}: {how} "
            f"(permissions judged by {judged}).",
        )
    ]
    if node.runs == "none":
        found.append(
            Finding(
                "warning",
                "W035",
                f"{node.server} at {node.where} refuses user {node.user!r} scripting: FCALL "
                f"({node.refused.get('FCALL', 'refused')}), EVALSHA and EVAL "
                f"({node.refused.get('EVALSHA') or node.refused.get('EVAL')}). Every request "
                "gets its policy's fail mode.",
                "Grant the limiter's user +fcall or +evalsha and +eval (docs/redis.md "
                "lists the whole ACL).",
            )
        )
    # Scripting is judged above; FUNCTION LOAD refused only costs the script fallback.
    missing = sorted(name for name in node.refused if name not in _SCRIPTING)
    if missing:
        limiter_needs = {label(n) for n in _needs() if n.who == "limiter"}
        whose = [
            f"{name} ({'the limiter' if name in limiter_needs else 'the tools and the admin'})"
            for name in missing
        ]
        found.append(
            Finding(
                "warning",
                "W036",
                f"{node.server} at {node.where} refuses user {node.user!r}: "
                + "; ".join(f"{w}: {node.refused[n]}" for w, n in zip(whose, missing, strict=True))
                + ".",
                "Grant these commands, on the keys under KEY_PREFIX; docs/redis.md lists "
                "the ACL the limiter, the tools and the admin need.",
            )
        )
    return found


def check() -> list[Finding]:
    """Every finding, for each primary of the limiter's Redis."""
    try:
        client = connection.new_client(TIMEOUT)
    except (*connection.REDIS_ERRORS, OSError) as e:
        return [connect_failure(e)]
    found: list[Finding] = []
    try:
        for node in connection.node_clients(client):
            try:
                found.extend(findings(read_node(node)))
            except (*connection.REDIS_ERRORS, OSError) as e:
                found.append(connect_failure(e))
    except (*connection.REDIS_ERRORS, OSError) as e:
        found.append(connect_failure(e))
    finally:
        connection.close(client)
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
