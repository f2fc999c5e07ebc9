"""The dotted paths and names the checks look for in a project's settings."""

from __future__ import annotations

THROTTLE_PATH = "ratelimits.throttling.PolicyThrottle"
MIDDLEWARE_PATH = "ratelimits.middleware.RateLimitHeadersMiddleware"
LIMITER_MIDDLEWARE_PATH = "ratelimits.middleware.RateLimitMiddleware"
SIGN_IN_BACKEND_PATH = "ratelimits.backends.RateLimitBackend"
DJANGO_REDIS_BACKEND = "django_redis.cache.RedisCache"
DJANGO_VALKEY_BACKEND = "django_valkey.cache.ValkeyCache"
DJANGO_VALKEY_ASYNC_BACKEND = "django_valkey.async_cache.cache.AsyncValkeyCache"
DJANGO_VALKEY_CLUSTER_BACKEND = "django_valkey.cluster_cache.cache.ClusterValkeyCache"
