"""Redis key names: ``<prefix>:{<identity>}:<policy>:<algorithm>``.

The identity between braces is the Redis Cluster hash tag, so every key of one client
lives in one slot and one script call can touch them all. The policy's limit and window
are not in the key: editing them keeps the counts already made. Identities are bounded
(see :mod:`ratelimits.identity`), names are slugs of at most 64 characters and the prefix
at most 32, so a key never exceeds :data:`MAX_KEY_LENGTH`.
"""

from __future__ import annotations

import re

ALGORITHM_SUFFIX = {
    "sliding_log": "log",
    "sliding_counter": "counter",
    "fixed_window": "fixed",
}
PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")
MAX_KEY_LENGTH = 32 + 3 + 60 + 2 + 64 + 1 + 7

KEY_PATTERN = re.compile(
    r"^(?P<prefix>[^{]+):\{(?P<identity>[^}]+)\}:(?P<policy>[-A-Za-z0-9_]+):(?P<suffix>[a-z]+)$"
)


def build_key(prefix: str, identity: str, policy_name: str, algorithm: str) -> str:
    return f"{prefix}:{{{identity}}}:{policy_name}:{ALGORITHM_SUFFIX[algorithm]}"


def version_key(prefix: str) -> str:
    """The policy table's version stamp, bumped on every committed change."""
    return f"{prefix}:policies:version"
