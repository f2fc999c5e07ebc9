"""What a Redis error says about the server: it cannot take calls now (an outage, for the
breaker and the fail mode), our own side has no connection free (not the server's fault),
or this call failed on its keys (a script error, which says nothing of the server).

A server that is up can still refuse every call for a while, whatever its keys:

- ``OOM``: ``maxmemory`` is reached under ``noeviction`` (a full Redis refuses writes);
- ``BUSY``: a script or function runs past ``busy-reply-threshold`` (``lua-time-limit``);
- ``LOADING``: it is loading its data set after a restart;
- ``READONLY``: it is a replica now (a failover), or ``MASTERDOWN``: a replica that lost
  its primary and serves no stale data;
- ``NOREPLICAS`` (``min-replicas-to-write`` unmet), ``MISCONF`` (a failing RDB save under
  ``stop-writes-on-bgsave-error``), ``CLUSTERDOWN``;
- ``NOPERM``: an ACL refuses this user the decide code (``FCALL`` falls back to the
  script first: see :func:`ratelimits.engine.store.commands.recover`), the keys, or a
  command the code runs (worded "The user executing the script can't run this command"). Not
  for now but until someone grants it: still, every call fails alike, so the breaker
  opens and logs it once (as an error, :func:`is_denied`), not every request.

redis-py raises an error class of its own for some of these (``OutOfMemoryError``,
``ReadOnlyError``, ``BusyLoadingError``, ``ClusterDownError``, ``MasterDownError``),
dropping the code from the message; the others are plain ``ResponseError``\\s whose message
starts with the code. Redis 6.2 wraps the error of a command a script ran in its own
(``Error running script (call to f_…): @user_script:12: … -OOM command not allowed …``),
so a code behind ``-`` after the script's location counts too.
"""

from __future__ import annotations

import re

import redis
from redis import exceptions

#: Error codes of a server that refuses calls for now, whatever their keys.
UNAVAILABLE_CODES = frozenset(
    {
        "OOM",
        "BUSY",
        "LOADING",
        "READONLY",
        "MASTERDOWN",
        "NOREPLICAS",
        "MISCONF",
        "CLUSTERDOWN",
        "NOPERM",
    }
)

#: redis-py's classes for some of them (their message has lost the code), by code.
_CLASSES: tuple[tuple[str, type[Exception]], ...] = tuple(
    (code, cls)
    for code, cls in (
        ("OOM", getattr(exceptions, "OutOfMemoryError", None)),
        ("READONLY", getattr(exceptions, "ReadOnlyError", None)),
        ("LOADING", getattr(exceptions, "BusyLoadingError", None)),
        ("MASTERDOWN", getattr(exceptions, "MasterDownError", None)),  # before its base
        ("CLUSTERDOWN", getattr(exceptions, "ClusterDownError", None)),
        ("NOPERM", getattr(exceptions, "NoPermissionError", None)),
    )
    if cls is not None
)

#: An ACL's refusal of a command the script runs, which the server words without
#: ``NOPERM``: Redis 7 and 6.2, then Valkey ("ACL failure in script: User ... has no
#: permissions to run the 'zadd' command").
_SCRIPT_DENIED = ("The user executing the script can't run this command", "ACL failure in script")

#: A command's error inside a Redis 6.2 script error: ``…@user_script: 12: -OOM …``.
_WRAPPED = re.compile(r"@user_script:? ?\d+: -([A-Z]+) ")


class PoolBusy(redis.RedisError):
    """Every connection this process may open to the server is taken by other calls
    (ours), and none came free in time: our side is busy, the server may be fine."""


def code_of(error: BaseException) -> str | None:
    """The code of an error that says the server refuses calls for now (one of
    :data:`UNAVAILABLE_CODES`), else ``None``."""
    for code, cls in _CLASSES:
        if isinstance(error, cls):
            return code
    if not isinstance(error, exceptions.ResponseError):
        return None
    message = str(error)
    first = message.split(" ", 1)[0]
    if first in UNAVAILABLE_CODES:
        return first
    if any(wording in message for wording in _SCRIPT_DENIED):
        return "NOPERM"
    wrapped = _WRAPPED.search(message)
    if wrapped is not None and wrapped.group(1) in UNAVAILABLE_CODES:
        return wrapped.group(1)
    return None


def is_denied(error: BaseException) -> bool:
    """True when ``error`` is an ACL's refusal (``NOPERM``) of a command or of keys."""
    return code_of(error) == "NOPERM"


def is_pool_busy(error: BaseException) -> bool:
    """True when ``error`` says no connection of our own was free in time
    (:class:`PoolBusy`, or redis-py's pool at ``max_connections``, or its blocking pool
    after its timeout), not that the server failed."""
    if isinstance(error, PoolBusy):
        return True
    maxed = getattr(exceptions, "MaxConnectionsError", None)
    if maxed is not None and isinstance(error, maxed):
        return True
    return type(error) is redis.ConnectionError and str(error) in (
        "Too many connections",
        "No connection available.",
    )


def is_outage(error: BaseException) -> bool:
    """True when ``error`` says the server cannot decide now (unreachable, slow, or
    refusing every call: :data:`UNAVAILABLE_CODES`), which its breaker counts; False when
    the call failed on its keys (say, a foreign value at one), or when only our own side
    had no connection free (:func:`is_pool_busy`)."""
    if is_pool_busy(error):
        return False
    if not isinstance(error, exceptions.ResponseError):
        return True
    return code_of(error) is not None


def describe(error: BaseException) -> str:
    """``error``'s message from its code on: the code put back in front where redis-py
    took it off (``OOM command not allowed when used memory > 'maxmemory'.``), a Redis
    6.2 script's wrapping left out."""
    message = str(error)
    code = code_of(error)
    if code is None or message.startswith(code):
        return message
    wrapped = _WRAPPED.search(message)
    if wrapped is not None and wrapped.group(1) == code:
        return message[wrapped.start(1) :]
    return f"{code} {message}"


#: redis-py's errors for refused credentials (``AuthorizationError`` is not in every version).
CREDENTIALS_REFUSED: tuple[type[Exception], ...] = tuple(
    cls
    for cls in (exceptions.AuthenticationError, getattr(exceptions, "AuthorizationError", None))
    if cls is not None
)


def what_went_wrong(error: BaseException) -> str:
    """What ``error`` says happened, for people: ``did not answer`` only when Redis did
    not (a timeout, a refused or closed connection); otherwise what it answered."""
    if isinstance(error, CREDENTIALS_REFUSED):
        return "refused the credentials"
    if isinstance(error, exceptions.ResponseError):
        code = code_of(error)
        if code == "NOPERM":
            return "refused this user a command or key (a permission: see docs/redis.md)"
        if code == "OOM":
            return "is full (OOM: maxmemory reached under noeviction)"
        if code is not None:
            return f"refused the call for now ({code})"
        return "answered with an error"
    return "did not answer"
