"""Django system checks for a misconfigured ratelimits (``manage.py check``)."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core.checks import Error, Info, Tags, Warning, register
from django.db import DatabaseError
from django.db.models import Q
from django.urls import URLResolver, get_resolver
from django.utils.module_loading import import_string

from ratelimits.conf import DEFAULTS, user_settings
from ratelimits.engine import keys, periods
from ratelimits.engine.store import access, connection, eviction, scripts
from ratelimits.exceptions import ConfigurationError
from ratelimits.http.gate import scope_of
from ratelimits.http.proxies import parse_network
from ratelimits.models import Policy

THROTTLE_PATH = "ratelimits.throttling.PolicyThrottle"
MIDDLEWARE_PATH = "ratelimits.middleware.RateLimitHeadersMiddleware"
LIMITER_MIDDLEWARE_PATH = "ratelimits.middleware.RateLimitMiddleware"
SIGN_IN_BACKEND_PATH = "ratelimits.backends.RateLimitBackend"
DJANGO_REDIS_BACKEND = "django_redis.cache.RedisCache"
#: The ``counts`` of a policy against guessing (with any policy that has a lockout): W040.
GUESSING_COUNTS = ("failures", "sign_in_failures")

_POSITIVE_NUMBERS = (
    "SOCKET_TIMEOUT",
    "POLICY_REFRESH_INTERVAL",
    "POLICY_MAX_AGE",
    "BREAKER_COOLDOWN",
    "METRICS_FLUSH_INTERVAL",
)


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    raw = getattr(settings, "RATELIMITS", None)
    if raw is not None and not isinstance(raw, dict):
        return [
            Error(
                "RATELIMITS must be a dict.",
                hint="For example RATELIMITS = {'CACHE': 'default'}.",
                id="ratelimits.E001",
            )
        ]
    errors: list[Any] = []
    given = user_settings()
    for name in sorted(set(given) - set(DEFAULTS)):
        errors.append(
            Warning(
                f"RATELIMITS has an unknown setting {name!r}; it is ignored.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="ratelimits.W003",
            )
        )
    value = {**DEFAULTS, **given}
    problems: list[str] = []
    if not isinstance(value["KEY_PREFIX"], str) or not keys.PREFIX_PATTERN.match(
        value["KEY_PREFIX"]
    ):
        problems.append("KEY_PREFIX must be 1 to 32 characters from A-Z a-z 0-9 _ . : -")
    for name in _POSITIVE_NUMBERS:
        if not _is_number(value[name]) or value[name] <= 0:
            problems.append(f"{name} must be a number greater than 0")
    for name in ("NUM_PROXIES", "FAIL_CLOSED_RETRY_AFTER", "LOCAL_DENIALS"):
        if not _is_integer(value[name]) or value[name] < 0:
            problems.append(f"{name} must be an integer >= 0")
    if not _is_integer(value["BREAKER_THRESHOLD"]) or value["BREAKER_THRESHOLD"] < 1:
        problems.append("BREAKER_THRESHOLD must be an integer >= 1")
    if not _is_integer(value["MAX_COST"]) or value["MAX_COST"] < 1:
        problems.append("MAX_COST must be an integer >= 1")
    if not _is_integer(value["IPV6_PREFIX"]) or not 0 <= value["IPV6_PREFIX"] <= 128:
        problems.append("IPV6_PREFIX must be an integer from 0 to 128")
    if not _is_number(value["NEAR_LIMIT"]) or not 0 < value["NEAR_LIMIT"] <= 1:
        problems.append(
            "NEAR_LIMIT must be a number greater than 0 and at most 1 (a fraction of the "
            f"limit, such as 0.8), not {value['NEAR_LIMIT']!r}"
        )
    problems.extend(_cluster_node_problems(value["CLUSTER_NODES"]))
    problems.extend(_exempt_network_problems(value["EXEMPT_NETWORKS"]))
    problems.extend(
        _exempt_network_problems(value["METRICS_ALLOWED_NETWORKS"], "METRICS_ALLOWED_NETWORKS")
    )
    problems.extend(_trusted_proxy_problems(value["TRUSTED_PROXIES"]))
    errors.extend(
        Error(
            f"RATELIMITS: {problem}.",
            hint="See docs/settings.md: each setting, its default and the values it takes.",
            id="ratelimits.E002",
        )
        for problem in problems
    )
    return errors


def _exempt_network_problems(networks: Any, name: str = "EXEMPT_NETWORKS") -> list[str]:
    if not isinstance(networks, (list, tuple)) or not all(isinstance(n, str) for n in networks):
        return [f"{name} must be a list of networks such as '10.0.0.0/8'"]
    problems = []
    for network in networks:
        try:
            ipaddress.ip_network(network.strip(), strict=False)
        except ValueError:
            problems.append(f"{name}: {network!r} is not an IP address or network")
    return problems


def _trusted_proxy_problems(entries: Any) -> list[str]:
    if not isinstance(entries, (list, tuple)):
        return ["TRUSTED_PROXIES must be a list of networks such as '10.0.0.0/8'"]
    problems = []
    for entry in entries:
        try:
            parse_network(entry)
        except ValueError as e:
            problems.append(f"TRUSTED_PROXIES: {e}")
    return problems


@register(Tags.security)
def check_proxies(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W010: a ``TRUSTED_PROXIES`` entry that trusts more than it likely means; W011: an
    ``EXEMPT_NETWORKS`` address a client can claim in a header (``NUM_PROXIES`` believes
    every sender); W012: ``NUM_PROXIES`` ignored beside ``TRUSTED_PROXIES``."""
    value = {**DEFAULTS, **user_settings()}
    trusted, proxies = value["TRUSTED_PROXIES"], value["NUM_PROXIES"]
    found: list[Any] = []
    for entry in trusted if isinstance(trusted, (list, tuple)) else ():
        try:
            network = parse_network(entry)
        except ValueError:
            continue  # E002
        problem = None
        if network.prefixlen == 0:
            problem = "trusts every address: any client can write its own address"
        elif _has_host_bits(entry):
            problem = f"has host bits set: it trusts all of {network}"
        if problem:
            found.append(
                Warning(
                    f"RATELIMITS['TRUSTED_PROXIES'] entry {entry!r} {problem}.",
                    hint="List only the networks your proxies send from (their addresses, "
                    "or their subnet such as '10.0.0.0/24').",
                    id="ratelimits.W010",
                )
            )
    has_trusted = isinstance(trusted, (list, tuple)) and bool(trusted)
    if not has_trusted and _is_integer(proxies) and proxies > 0 and value["EXEMPT_NETWORKS"]:
        found.append(
            Warning(
                "RATELIMITS['EXEMPT_NETWORKS'] is set and NUM_PROXIES believes "
                "X-Forwarded-For from any sender: a client that reaches the site without "
                "passing the proxies can write an exempt address in the header.",
                hint="Set RATELIMITS['TRUSTED_PROXIES'] to your proxies' networks instead "
                "of NUM_PROXIES: the header is then read only from them.",
                id="ratelimits.W011",
            )
        )
    if has_trusted and _is_integer(proxies) and proxies > 0:
        found.append(
            Warning(
                "RATELIMITS sets both TRUSTED_PROXIES and NUM_PROXIES; NUM_PROXIES is ignored.",
                hint="Remove NUM_PROXIES: TRUSTED_PROXIES decides whose forwarding headers "
                "are read, and how far.",
                id="ratelimits.W012",
            )
        )
    return found


def _has_host_bits(entry: str) -> bool:
    """True for a network written with host bits ("10.0.0.1/8"), which parses leniently."""
    try:
        ipaddress.ip_network(entry.strip())
    except ValueError:
        return True
    return False


def _cluster_node_problems(nodes: Any) -> list[str]:
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, str) for n in nodes):
        return ["CLUSTER_NODES must be a list of 'redis://host:port' strings"]
    problems = []
    for node in nodes:
        try:
            connection.parse_node(node)
        except ValueError as e:
            problems.append(f"CLUSTER_NODES: {e}")
    return problems


@register(Tags.caches)
def check_cache(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if {**DEFAULTS, **user_settings()}["CLUSTER_NODES"]:
        return []  # the limiter uses the cluster, not a cache
    alias = {**DEFAULTS, **user_settings()}["CACHE"]
    caches_setting = getattr(settings, "CACHES", {})
    if alias not in caches_setting:
        return [
            Error(
                f"RATELIMITS['CACHE'] is {alias!r}, but CACHES has no such alias.",
                hint=f"Add a django-redis cache named {alias!r} to CACHES, or point "
                "RATELIMITS['CACHE'] at one.",
                id="ratelimits.E003",
            )
        ]
    backend = caches_setting[alias].get("BACKEND", "")
    if not _is_django_redis(backend):
        return [
            Error(
                f"The cache {alias!r} uses {backend!r}, which is not django-redis.",
                hint=f"Use BACKEND '{DJANGO_REDIS_BACKEND}' for the cache ratelimits uses.",
                id="ratelimits.E004",
            )
        ]
    return []


@register()
def check_scripts(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    missing = scripts.missing_parts()
    if not missing:
        return []
    return [
        Error(
            f"The ratelimits Lua scripts are missing: {', '.join(missing)}.",
            hint="Reinstall ratelimits; the wheel carries them as the package ratelimits.lua.",
            id="ratelimits.E005",
        )
    ]


@register()
def check_installed(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    found: list[Any] = []
    rest = getattr(settings, "REST_FRAMEWORK", {}) or {}
    middleware = list(getattr(settings, "MIDDLEWARE", ()) or ())
    if (
        THROTTLE_PATH not in rest.get("DEFAULT_THROTTLE_CLASSES", ())
        and LIMITER_MIDDLEWARE_PATH not in middleware
        and not _decorator_in_use()
    ):
        found.append(
            Warning(
                "PolicyThrottle is not in REST_FRAMEWORK['DEFAULT_THROTTLE_CLASSES'], "
                "RateLimitMiddleware is not in MIDDLEWARE and no view uses the ratelimit "
                "decorator: only views that list PolicyThrottle in throttle_classes are "
                "limited.",
                hint=f"Add '{LIMITER_MIDDLEWARE_PATH}' to MIDDLEWARE, or '{THROTTLE_PATH}' "
                "to DEFAULT_THROTTLE_CLASSES, or silence ratelimits.W001 if you apply "
                "PolicyThrottle per view.",
                id="ratelimits.W001",
            )
        )
    headers_on = {**DEFAULTS, **user_settings()}["HEADERS"]
    if headers_on and MIDDLEWARE_PATH not in middleware:
        found.append(
            Warning(
                "RATELIMITS['HEADERS'] is on but the header middleware is not installed, so "
                "responses carry no RateLimit headers.",
                hint=f"Add '{MIDDLEWARE_PATH}' to MIDDLEWARE, "
                "or set RATELIMITS['HEADERS'] = False.",
                id="ratelimits.W002",
            )
        )
    if (
        MIDDLEWARE_PATH in middleware
        and LIMITER_MIDDLEWARE_PATH in middleware
        and middleware.index(MIDDLEWARE_PATH) > middleware.index(LIMITER_MIDDLEWARE_PATH)
    ):
        found.append(
            Warning(
                "RateLimitHeadersMiddleware is below RateLimitMiddleware in MIDDLEWARE: a "
                "response passes the header middleware before RateLimitMiddleware, so the "
                "decisions RateLimitMiddleware makes on its way out would miss the "
                "RateLimit headers.",
                hint=f"Move '{MIDDLEWARE_PATH}' above '{LIMITER_MIDDLEWARE_PATH}'.",
                id="ratelimits.W004",
            )
        )
    return found


@register()
def check_throttled_view(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    path = user_settings().get("THROTTLED_VIEW")
    if path is None:
        return []
    problem = None
    if not isinstance(path, str) or not path:
        problem = "must be the dotted path of a view, such as 'myapp.views.throttled'"
    else:
        try:
            view = import_string(path)
        except ImportError as e:
            problem = f"cannot import {path!r} ({e})"
        else:
            if not callable(view):
                problem = f"{path!r} is not callable"
    if problem is None:
        return []
    return [
        Error(
            f"RATELIMITS['THROTTLED_VIEW'] {problem}.",
            hint="Name a view taking (request, exception), like CSRF_FAILURE_VIEW.",
            id="ratelimits.E006",
        )
    ]


@register(Tags.database)
def check_time_zones(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Any]:
    """W005: an enabled calendar policy whose time zone this machine does not know (its
    time zone database lacks it, or has none: no ``tzdata``). Reads the policies, so it
    runs as Django's database checks do: on ``migrate`` and ``check --database``."""
    found: list[Any] = []
    for alias in databases or ():
        rows = Policy.objects.using(alias).filter(enabled=True).exclude(calendar="")
        try:
            named = list(rows.order_by("name").values_list("name", "time_zone"))
        except DatabaseError:  # not migrated yet: migrate runs these checks first
            continue
        for name, time_zone in named:
            zone = time_zone or settings.TIME_ZONE or "UTC"
            try:
                periods.zone(zone)
            except periods.UnknownTimeZone:
                found.append(_unknown_zone(name, zone, time_zone))
    return found


@register(Tags.database, Tags.security)
def check_guessing_fails_closed(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """W040: an enabled policy against guessing (it counts failures or failed sign-ins, or
    has a lockout) that fails open: whoever makes Redis unavailable (a flood, a failover)
    gets unlimited guesses meanwhile. A database check, as W005."""
    found: list[Any] = []
    for alias in databases or ():
        rows = (
            Policy.objects.using(alias)
            .filter(enabled=True, fail_open=True)
            .filter(Q(counts__in=GUESSING_COUNTS) | Q(lockout__gt=0))
        )
        try:
            named = list(rows.order_by("name").values_list("name", "counts", "lockout"))
        except DatabaseError:  # not migrated yet: migrate runs these checks first
            continue
        for name, counts, lockout in named:
            kind = "has a lockout" if lockout else f"counts {counts}"
            found.append(
                Warning(
                    f"The policy {name!r} {kind}, a guard against guessing, but fails open: "
                    "while Redis cannot answer it lets every attempt through, so whoever "
                    "can make Redis unavailable gets unlimited guesses.",
                    hint="Untick fail_open on the policy in the admin (deny while Redis "
                    "cannot answer), or silence ratelimits.W040 if availability matters "
                    "more here.",
                    id="ratelimits.W040",
                )
            )
    return found


def _unknown_zone(policy: str, zone: str, given: str) -> Warning:
    where = "" if given else " (its time_zone is blank: the site's TIME_ZONE)"
    return Warning(
        f"The policy {policy!r} counts calendar periods in the time zone {zone!r}{where}, "
        "which this machine's time zone database does not know: it cannot be compiled "
        "here, so the policy table leaves it out and it limits nothing.",
        hint="Install the IANA time zone database (pip install tzdata, or the system's "
        "tzdata package), or give the policy a time zone this machine knows, such as "
        "UTC, in the admin.",
        id="ratelimits.W005",
    )


def _decorator_in_use() -> bool:
    """True when a view in the URLconf carries the ratelimit decorator."""
    try:
        patterns = list(get_resolver().url_patterns)
    except Exception:  # a broken URLconf is Django's own check to report
        return False
    while patterns:
        pattern = patterns.pop()
        if isinstance(pattern, URLResolver):
            patterns.extend(pattern.url_patterns)
        elif scope_of(pattern.callback) is not None:
            return True
    return False


def _is_django_redis(backend: str) -> bool:
    if backend == DJANGO_REDIS_BACKEND:
        return True
    try:
        from django_redis.cache import RedisCache

        return issubclass(import_string(backend), RedisCache)
    except (ImportError, TypeError):
        return False


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@register(Tags.security)
def check_sign_in_backend(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W020: ``RateLimitBackend`` listed after another authentication backend, which then
    checks a password before the sign-in policies can refuse the attempt."""
    backends = list(getattr(settings, "AUTHENTICATION_BACKENDS", ()) or ())
    if SIGN_IN_BACKEND_PATH not in backends or backends[0] == SIGN_IN_BACKEND_PATH:
        return []
    return [
        Warning(
            f"{SIGN_IN_BACKEND_PATH} is not first in AUTHENTICATION_BACKENDS: the backends "
            "above it check passwords before the sign-in policies are asked, so a "
            "password is still tried, and a right one accepted, while a sign-in policy "
            "would refuse the attempt.",
            hint=f"Move '{SIGN_IN_BACKEND_PATH}' to the top of AUTHENTICATION_BACKENDS.",
            id="ratelimits.W020",
        )
    ]


@register(Tags.database)
def check_sign_in_policies(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """W021: an enabled sign-in policy with no ``RateLimitBackend`` to decide it; W022: an
    enabled failures policy while ``RateLimitMiddleware``, which counts a DRF or
    django-ninja view's failed authentication, is not installed. Database checks."""
    backends = list(getattr(settings, "AUTHENTICATION_BACKENDS", ()) or ())
    middleware = list(getattr(settings, "MIDDLEWARE", ()) or ())
    found: list[Any] = []
    for alias in databases or ():
        enabled = Policy.objects.using(alias).filter(enabled=True).order_by("name")
        try:
            sign_in = list(enabled.filter(counts="sign_in_failures").values_list("name", flat=True))
            failures = list(enabled.filter(counts="failures").values_list("name", flat=True))
        except DatabaseError:  # not migrated yet: migrate runs these checks first
            continue
        if sign_in and SIGN_IN_BACKEND_PATH not in backends:
            found.append(
                Warning(
                    f"The sign-in policies {', '.join(sign_in)} count failed sign-ins, but "
                    f"{SIGN_IN_BACKEND_PATH} is not in AUTHENTICATION_BACKENDS: nothing "
                    "counts or refuses a sign-in.",
                    hint=f"Put '{SIGN_IN_BACKEND_PATH}' first in AUTHENTICATION_BACKENDS.",
                    id="ratelimits.W021",
                )
            )
        if failures and LIMITER_MIDDLEWARE_PATH not in middleware:
            found.append(
                Warning(
                    f"The policies {', '.join(failures)} count failures, but "
                    "RateLimitMiddleware is not in MIDDLEWARE: DRF and django-ninja "
                    "authenticate before their throttles run, so a wrong password, token "
                    "or API key on their views is never counted.",
                    hint=f"Add '{LIMITER_MIDDLEWARE_PATH}' to MIDDLEWARE, below Django's "
                    "AuthenticationMiddleware.",
                    id="ratelimits.W022",
                )
            )
    return found


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
        "names a django-redis cache on it. Every ratelimits key has a TTL, so the "
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
        connection.cluster_options()
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
