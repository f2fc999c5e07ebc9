"""The dotted paths and names the checks look for in a project's settings."""

from __future__ import annotations

THROTTLE_PATH = "ratelimits.throttling.PolicyThrottle"
MIDDLEWARE_PATH = "ratelimits.middleware.RateLimitHeadersMiddleware"
LIMITER_MIDDLEWARE_PATH = "ratelimits.middleware.RateLimitMiddleware"
SIGN_IN_BACKEND_PATH = "ratelimits.backends.RateLimitBackend"
DJANGO_REDIS_BACKEND = "django_redis.cache.RedisCache"
