"""Redis key names: ``<prefix>:{<identity>}:<policy>:<algorithm>``.

The identity between braces is the Redis Cluster hash tag, so every key of one client
lives in one slot and one script call can touch them all. A policy split into shards
(``Policy.shards`` > 1) adds the shard to the tag, ``{global@2}``, so its shards land in
different slots, and on a cluster on different nodes. The policy's limit and window
are not in the key: editing them keeps the counts already made. Identities are bounded
(see :mod:`~.identity`), names are slugs of at most 64 characters and the prefix
at most 32, so a key never exceeds :data:`MAX_KEY_LENGTH`.

A policy with a lockout keeps, beside a locked-out client's counts, its lock:
``<prefix>:{<identity>}:<policy>:lock`` (:data:`LOCK_SUFFIX`; ``lua/decide.lua`` writes it),
holding when the lockout ends. :func:`parse_key` reads it as a :class:`KeyName` with
``lock`` set and no algorithm: it holds a time, not counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ratelimits.engine.algorithms import ALGORITHMS

#: The last part of each algorithm's keys (:attr:`Algorithm.suffix
#: <ratelimits.engine.algorithms.Algorithm.suffix>`).
ALGORITHM_SUFFIX = {a.name: a.suffix for a in ALGORITHMS}
#: Each algorithm by the last part of its keys.
SUFFIX_ALGORITHM = {suffix: algorithm for algorithm, suffix in ALGORITHM_SUFFIX.items()}
#: The last part of a lockout's key, in place of the counts' algorithm suffix.
LOCK_SUFFIX = "lock"
PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")
MAX_KEY_LENGTH = 32 + 3 + 60 + 3 + 2 + 64 + 1 + 7
SHARD_SEPARATOR = "@"

KEY_PATTERN = re.compile(
    r"^(?P<prefix>[^{]+):\{(?P<identity>[^}]+)\}:(?P<policy>[-A-Za-z0-9_]+):(?P<suffix>[a-z]+)$"
)


@dataclass(frozen=True, slots=True)
class KeyName:
    """A limiter key taken apart."""

    key: str
    prefix: str
    identity: str
    policy: str
    algorithm: str
    #: The shard of a sharded policy's key; ``None`` for an unsharded one.
    shard: int | None = None
    #: True for a lockout's key (``algorithm`` is then ""): it holds when the client's
    #: lockout ends, in microseconds on the Redis clock, and expires then.
    lock: bool = False


def build_key(
    prefix: str, identity: str, policy_name: str, algorithm: str, shard: int | None = None
) -> str:
    tag = identity if shard is None else f"{identity}{SHARD_SEPARATOR}{shard}"
    return f"{prefix}:{{{tag}}}:{policy_name}:{ALGORITHM_SUFFIX[algorithm]}"


def lock_key(key: str) -> str:
    """The lockout's key beside the counts' ``key`` (named as ``lua/decide.lua`` names it)."""
    return f"{key.rpartition(':')[0]}:{LOCK_SUFFIX}"


def counts_name(lock: KeyName, algorithm: str) -> KeyName:
    """The counts' key beside the lockout's key ``lock``, for a policy using ``algorithm``."""
    key = build_key(lock.prefix, lock.identity, lock.policy, algorithm, lock.shard)
    return replace(lock, key=key, algorithm=algorithm, lock=False)


def version_key(prefix: str) -> str:
    """The policy table's version stamp, bumped on every committed change."""
    return f"{prefix}:policies:version"


def parse_key(key: str | bytes, prefix: str) -> KeyName | None:
    """``key`` taken apart, or ``None`` when it is not a limiter key under ``prefix`` (a
    lockout's key is one: see :attr:`KeyName.lock`)."""
    if isinstance(key, bytes):
        try:
            key = key.decode()
        except UnicodeDecodeError:
            return None
    match = KEY_PATTERN.match(key)
    if match is None or match["prefix"] != prefix:
        return None
    suffix = match["suffix"]
    if suffix not in SUFFIX_ALGORITHM and suffix != LOCK_SUFFIX:
        return None
    identity, shard = match["identity"], None
    who, separator, number = identity.rpartition(SHARD_SEPARATOR)
    if separator and who and number.isdigit() and str(int(number)) == number:
        identity, shard = who, int(number)
    return KeyName(
        key=key,
        prefix=prefix,
        identity=identity,
        policy=match["policy"],
        algorithm=SUFFIX_ALGORITHM.get(suffix, ""),
        shard=shard,
        lock=suffix == LOCK_SUFFIX,
    )


def scan_pattern(
    prefix: str,
    *,
    identity: str | None = None,
    identity_glob: str | None = None,
    policy: str | None = None,
) -> str:
    """A ``SCAN MATCH`` pattern for limiter keys; ``identity`` and ``policy`` are literal,
    ``identity_glob`` is a Redis glob (``*``, ``?``, ``[...]``) over the identity.

    An ``identity`` also matches its shards' keys (``{global@2}``) and, being a prefix
    pattern, some other identities: compare the parsed identity to keep exactly one's."""
    if identity is not None:
        who = escape_glob(identity) + "*"
    elif identity_glob is not None:
        who = identity_glob
    else:
        who = "*"
    what = escape_glob(policy) if policy is not None else "*"
    return f"{escape_glob(prefix)}:{{{who}}}:{what}:*"


def escape_glob(text: str) -> str:
    """``text`` as a literal inside a Redis glob pattern."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)
