"""What the limiter's Redis lets this client do, for ``manage.py check --deploy``.

Connects (with the limiter's settings: address, credentials, TLS), then on each primary
asks which server and version answers, and whether this user may run what the limiter,
the management command and the admin send (:func:`~.access_needs.needs`):

- with ``ACL DRYRUN`` (Redis 7+, Valkey) where the user may run it: every command, with
  a key under ``KEY_PREFIX``, is judged by the server's ACL without running;
- otherwise by running the commands that change nothing (``FCALL`` and ``FCALL_RO`` of
  a function that does not exist, ``EVALSHA`` of a script that does not exist, reads of
  a key that does not exist): ``NOPERM`` says refused. The commands that write are then
  not checked. The tools' looks (``inspect``, ``keys``, the admin) are ``FCALL_RO``.

A failure to connect is told apart: the credentials refused, a TLS handshake failed,
or no answer at all (which the eviction check, W031, reports too).

What is sent is listed in :mod:`~.access_needs`; one primary is asked in
:mod:`~.access_probe`; this module turns the answers into findings.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from ratelimits.engine.store import connection, errors
from ratelimits.tools.diagnostics import acl_needs as access_needs
from ratelimits.tools.diagnostics.acl_needs import label
from ratelimits.tools.diagnostics.acl_probe import NodeAccess, read_node

#: Seconds the check waits for each Redis server.
TIMEOUT = 2.0


@dataclass
class Finding:
    """One result: ``level`` is ``info``, ``warning``; ``code`` the check id's number."""

    level: str
    code: str
    message: str
    hint: str = ""


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
        limiter_needs = {label(n) for n in access_needs.needs() if n.who == "limiter"}
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
