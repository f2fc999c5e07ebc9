"""Checks of the installation: the cache the counters live in (E003, E004: django-redis or
django-valkey), the Lua code (E005), and the faces in ``MIDDLEWARE`` and DRF's settings
(W001, W002, W004)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.urls import URLResolver, get_resolver
from django.utils.module_loading import import_string

from ratelimits.checks.names import (
    DJANGO_REDIS_BACKEND,
    DJANGO_VALKEY_ASYNC_BACKEND,
    DJANGO_VALKEY_BACKEND,
    DJANGO_VALKEY_CLUSTER_BACKEND,
    LIMITER_MIDDLEWARE_PATH,
    MIDDLEWARE_PATH,
    THROTTLE_PATH,
)
from ratelimits.conf import DEFAULTS, user_settings
from ratelimits.engine.store import scripts
from ratelimits.http.view_asks import scope_of


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
                hint=f"Add a django-redis or django-valkey cache named {alias!r} to CACHES, "
                "or point RATELIMITS['CACHE'] at one.",
                id="ratelimits.E003",
            )
        ]
    backend = caches_setting[alias].get("BACKEND", "")
    if _is_subclass(backend, DJANGO_REDIS_BACKEND) or _is_subclass(backend, DJANGO_VALKEY_BACKEND):
        return []
    return [
        Error(
            f"The cache {alias!r} uses {backend!r}, which is neither django-redis nor "
            "django-valkey's synchronous cache.",
            hint=_cache_hint(backend),
            id="ratelimits.E004",
        )
    ]


def _cache_hint(backend: str) -> str:
    """What to use instead of ``backend``, said for the caches people try."""
    if _is_subclass(backend, DJANGO_VALKEY_CLUSTER_BACKEND):
        return (
            "The limiter talks to a cluster itself: set RATELIMITS['CLUSTER_NODES'] to the "
            "cluster's nodes (docs/cluster.md) instead of naming this cache."
        )
    if _is_subclass(backend, DJANGO_VALKEY_ASYNC_BACKEND):
        return (
            f"Add a cache with BACKEND '{DJANGO_VALKEY_BACKEND}' and the same LOCATION and "
            "OPTIONS, and name it in RATELIMITS['CACHE']: the limiter copies its settings "
            "and still decides async views on redis.asyncio."
        )
    return (
        f"Use BACKEND '{DJANGO_REDIS_BACKEND}' (django-redis) or '{DJANGO_VALKEY_BACKEND}' "
        "(django-valkey) for the cache ratelimits uses."
    )


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


def _is_subclass(backend: str, wanted: str) -> bool:
    """Whether the cache backend ``backend`` is ``wanted`` or a subclass of it (``False``
    when either cannot be imported: the library is not installed)."""
    if backend == wanted:
        return True
    try:
        return issubclass(import_string(backend), import_string(wanted))
    except (ImportError, TypeError):
        return False
