"""Helpers for tests of projects that use ratelimits (and for ours).

:class:`RedisServer` starts a real, throw-away ``redis-server`` on a free port of
127.0.0.1; :class:`RedisSentinel` a Sentinel watching one; :class:`RedisClusterServers` a
local Redis Cluster, which a test can grow (:meth:`~RedisClusterServers.add_primary`,
:meth:`~RedisClusterServers.move_slots`, :class:`SlotMigration`). :func:`reset_state`
forgets every per-process cache of the app, so a test starts from the database and Redis
alone. :func:`limits_off` and :func:`limits_shadow` set ``RATELIMITS["MODE"]`` for a test
(a context manager or a decorator).

A project's throttle tests: :class:`RateLimitsTestMixin` (a ``TestCase``) and the pytest
fixture ``ratelimits_policies`` (with ``ratelimits_policy_file``, when pytest is there)
load the policies (from a policy file such as the plan ``adopt --output`` wrote, or the
database), clear the counters and build the table in the test's thread;
:class:`override_policy` changes a policy for one test.

The code lives in :mod:`ratelimits.testing`, one module a job; this module is the name
projects import.
"""

from __future__ import annotations

from importlib.util import find_spec

from ratelimits.testing.binaries import find_redis_cli, find_redis_server, find_valkey_server
from ratelimits.testing.cluster import RedisClusterServers
from ratelimits.testing.membership import node_id
from ratelimits.testing.modes import limits_off, limits_shadow
from ratelimits.testing.policies import (
    RateLimitsTestMixin,
    clear_counters,
    load_policies,
    override_policy,
    policies_for_test,
    reset_state,
)
from ratelimits.testing.ports import free_cluster_port, free_port
from ratelimits.testing.processes import stop_process
from ratelimits.testing.sentinel import RedisSentinel
from ratelimits.testing.server import RedisServer
from ratelimits.testing.slots import SlotMigration

__all__ = [
    "RateLimitsTestMixin",
    "RedisClusterServers",
    "RedisSentinel",
    "RedisServer",
    "SlotMigration",
    "clear_counters",
    "find_redis_cli",
    "find_redis_server",
    "find_valkey_server",
    "free_cluster_port",
    "free_port",
    "limits_off",
    "limits_shadow",
    "load_policies",
    "node_id",
    "override_policy",
    "policies_for_test",
    "reset_state",
    "stop_process",
]

if find_spec("pytest") is not None:  # the fixtures, for projects testing with pytest
    from ratelimits.testing.fixtures import ratelimits_policies, ratelimits_policy_file

    __all__ += ["ratelimits_policies", "ratelimits_policy_file"]
