"""Deploy checks that talk to the counters' Redis: whether it can evict them (W030,
W031) and what it lets the limiter do (I036, W032-W036)."""

from __future__ import annotations

from typing import Any

from django.core.checks import Info, Tags, Warning, register

from ratelimits.checks.installation import check_cache
from ratelimits.engine.store import cluster, connection
from ratelimits.exceptions import ConfigurationError
from ratelimits.tools.diagnostics import acl as access
from ratelimits.tools.diagnostics import eviction

#: Seconds the eviction check waits for each Redis server.
EVICTION_CHECK_TIMEOUT = 2.0


@register(Tags.caches, deploy=True)
def check_eviction(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W030: the counters' Redis can evict them (``maxmemory`` set, ``maxmemory-policy``
    not ``noeviction``), on any primary; W031: it could not be asked. Connects to Redis,
    so it runs with ``manage.py check --deploy`` only."""
    if check_cache():
        return []  # no Redis to ask: E003 or E004 says why
    try:
        client = connection.new_client(EVICTION_CHECK_TIMEOUT)
    except ConfigurationError:
        return []  # a bad setting: its own check reports it
    except (*connection.REDIS_ERRORS, OSError) as e:
        return [_eviction_unknown(connection.where(), e)]
    found: list[Any] = []
    try:
        nodes = connection.node_clients(client)
        for node in nodes:
            try:
                memory = eviction.read_node(node)
            except (*connection.REDIS_ERRORS, OSError) as e:
                found.append(_eviction_unknown(connection.describe(node), e))
                continue
            if memory.can_evict:
                found.append(_can_evict(memory))
    except (*connection.REDIS_ERRORS, OSError) as e:
        found.append(_eviction_unknown(connection.where(), e))
    finally:
        connection.close(client)
    return found


def _can_evict(memory: eviction.Memory) -> Warning:
    evicted = "an unknown number of" if memory.evicted_keys is None else memory.evicted_keys
    return Warning(
        f"The Redis that holds the rate-limit counters ({memory.node}) can evict them: "
        f"maxmemory is {memory.maxmemory_text} and maxmemory-policy is {memory.policy}. "
        "Once it is full, Redis deletes keys to make room, counters and lockouts among "
        "them: limits start again from zero and lockouts lift, and anyone able to fill "
        "it (with cache entries, or keys their requests mint) can cause that. It has "
        f"evicted {evicted} keys since it started.",
        hint="Give the counters a Redis of their own with maxmemory-policy noeviction "
        "(full, it refuses writes and each policy's fail mode applies); RATELIMITS['CACHE'] "
        "names a django-redis or django-valkey cache on it. Every ratelimits key has a TTL, so the "
        "volatile-* policies evict them too. A logical database (/1) of the cache's Redis "
        "shares that server's maxmemory and policy. See docs/failures.md.",
        id="ratelimits.W030",
    )


@register(Tags.caches, deploy=True)
def check_redis_access(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """I036: which server and version answers, and how the limiter's code runs there;
    W032: the credentials refused; W033: TLS failed (or a plain client on a TLS port);
    W034: no answer; W035: no script may run; W036: commands the limiter, the tools or the
    admin send that the ACL refuses (``ACL DRYRUN`` where the server and user have it).
    Connects to Redis, so it runs with ``manage.py check --deploy`` only."""
    if check_cache():
        return []  # no Redis to ask: E003 or E004 says why
    try:
        cluster.cluster_options()
    except ConfigurationError:
        return []  # a bad setting: reported where it is used
    kinds = {"info": Info, "warning": Warning}
    return [
        kinds[found.level](found.message, hint=found.hint or None, id=f"ratelimits.{found.code}")
        for found in access.check()
    ]


def _eviction_unknown(where: str, error: BaseException) -> Warning:
    return Warning(
        f"Could not read the memory settings of the Redis that holds the rate-limit "
        f"counters ({where}): {type(error).__name__}: {error}. Whether it can evict the "
        "counters is unknown.",
        hint="Run manage.py check --deploy where that Redis answers, and let the limiter's "
        "user run INFO (or CONFIG GET); its maxmemory-policy should be noeviction "
        "(docs/failures.md).",
        id="ratelimits.W031",
    )
