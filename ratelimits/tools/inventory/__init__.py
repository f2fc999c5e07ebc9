"""The limiter's keys in Redis, for tools: find them, read their usage, delete them.

Keys are found with ``SCAN`` and a ``MATCH`` pattern built from the key layout (never
``KEYS``, which blocks the server); on a Redis Cluster every primary is scanned, and
reads and deletes go to each key's node. Reading never consumes: counts come from the
decide script run with recording off, so they are the numbers the limiter itself would
see.

A lockout's key (``...:<policy>:lock``) is found by the same scans. :func:`usage` reads it
as a row of its own, with the lockout it holds and no count; the counts' key of a policy
with a lockout carries its client's lockout too. The tools that rank clients
(:func:`top`, :func:`nearest_limits`) read a client once, by its counts' key, which a
lockout's key stands for when the counts have expired before the lockout.

One module per job: :mod:`~.keyspace` (finding and deleting keys), :mod:`~.policies` (the
policies keys are read under), :mod:`~.usage` (reading keys) and :mod:`~.ranking` (the
clients nearest their limits).
"""

from ratelimits.tools.inventory.key_usage import READ_BATCH, KeyUsage, usage
from ratelimits.tools.inventory.keyspace import (
    SCAN_BATCH,
    Progress,
    by_node,
    delete,
    key_count,
    reset,
    scan,
)
from ratelimits.tools.inventory.policies import (
    KnownPolicies,
    known_policies,
    lock_to_read,
    missing_policy_note,
    policy_check,
)
from ratelimits.tools.inventory.ranking import clients_of, nearest_limits, top, used_share

__all__ = [
    "READ_BATCH",
    "SCAN_BATCH",
    "KeyUsage",
    "KnownPolicies",
    "Progress",
    "by_node",
    "clients_of",
    "delete",
    "key_count",
    "known_policies",
    "lock_to_read",
    "missing_policy_note",
    "nearest_limits",
    "policy_check",
    "reset",
    "scan",
    "top",
    "usage",
    "used_share",
]
