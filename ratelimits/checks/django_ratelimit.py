"""Checks of django-ratelimit's settings read by ``ratelimits.contrib.django_ratelimit``
(W050-W052, E050): where ``RATELIMIT_USE_CACHE`` puts the counters, and the settings it
cannot honour."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from ratelimits.conf import DEFAULTS, user_settings

#: django-ratelimit settings that have no meaning here, with why.
UNHONOURED = {
    "RATELIMIT_HASH_ALGORITHM": "ratelimits' Redis keys are readable, and hash only secrets",
    "RATELIMIT_CACHE_PREFIX": "ratelimits' keys start with RATELIMITS['KEY_PREFIX']",
}
_DUMMY = "django.core.cache.backends.dummy.DummyCache"
_REDIS = ("django_redis.cache.RedisCache", "django_valkey.cache.ValkeyCache")


@register(Tags.caches)
def check_django_ratelimit_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E050: ``RATELIMIT_USE_CACHE`` names a cache ``CACHES`` lacks; W050: it names a cache
    that is no Redis (the counters live in the limiter's Redis); W051: it names Django's
    dummy cache (nothing is limited); W052: a django-ratelimit setting that is not read."""
    found: list[Any] = []
    alias = getattr(settings, "RATELIMIT_USE_CACHE", None)
    limiter = {**DEFAULTS, **user_settings()}["CACHE"]
    if alias is not None and alias != limiter:
        backend = (getattr(settings, "CACHES", {}).get(alias) or {}).get("BACKEND")
        if backend is None:
            found.append(
                Error(
                    f"RATELIMIT_USE_CACHE names the cache {alias!r}, which CACHES lacks: "
                    "every django-ratelimit view raises InvalidCacheBackendError.",
                    hint=f"Remove RATELIMIT_USE_CACHE (the counters then live in the "
                    f"limiter's cache, {limiter!r}) or name a cache of CACHES.",
                    id="ratelimits.E050",
                )
            )
        elif backend == _DUMMY:
            found.append(
                Warning(
                    f"RATELIMIT_USE_CACHE names the dummy cache {alias!r}: the "
                    "django-ratelimit views count nothing and limit nothing.",
                    hint="Intended for development only; remove RATELIMIT_USE_CACHE to limit.",
                    id="ratelimits.W051",
                )
            )
        elif backend not in _REDIS:
            found.append(
                Warning(
                    f"RATELIMIT_USE_CACHE names the cache {alias!r} ({backend}), which is "
                    "no Redis: the django-ratelimit views count in the limiter's Redis, "
                    f"the cache {limiter!r}.",
                    hint="Remove RATELIMIT_USE_CACHE, or name a django-redis cache.",
                    id="ratelimits.W050",
                )
            )
    for name, why in UNHONOURED.items():
        if hasattr(settings, name):
            found.append(
                Warning(
                    f"{name} is django-ratelimit's and is not read: {why}.",
                    hint=f"Remove {name}; see docs/django-ratelimit.md.",
                    id="ratelimits.W052",
                )
            )
    return found
