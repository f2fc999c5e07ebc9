"""What the limiter, the management command and the admin send to Redis (:func:`needs`),
as ``ACL DRYRUN`` takes each command: the table the deploy check
(:mod:`ratelimits.tools.diagnostics.acl`) judges a server's ACL by."""

from __future__ import annotations

from dataclasses import dataclass

from ratelimits.conf import app_settings
from ratelimits.engine.keys.names import version_key
from ratelimits.engine.store import commands, scripts


@dataclass(frozen=True)
class Need:
    """A command someone sends, as ``ACL DRYRUN`` takes it; ``safe``: it can be run to
    see whether it is refused (it changes nothing)."""

    who: str
    name: str
    args: tuple[str, ...]
    safe: bool = True


def needs() -> tuple[Need, ...]:
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
