"""The demo as the tests serve it (:mod:`tests.site_settings`: the limiter waits up to 1 s
for Redis), limiting on the primary of a Sentinel service, through django-redis's
``SentinelClient``: ``RATELIMITS_SENTINEL_SERVICE`` names the service and
``RATELIMITS_SENTINELS`` its sentinels (``host:port``, separated by commas, in the order
the site asks them). Each response names the worker process that answered it
(:mod:`tests.engine.store.worker_middleware`). For
``tests/engine/store/test_sentinel_load.py``."""

import os

from tests.site_settings import *  # noqa: F403
from tests.site_settings import MIDDLEWARE

_SENTINELS = [
    (host, int(port))
    for host, _, port in (
        item.rpartition(":") for item in os.environ["RATELIMITS_SENTINELS"].split(",")
    )
]

DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": f"redis://{os.environ['RATELIMITS_SENTINEL_SERVICE']}/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "SENTINELS": _SENTINELS,
            "SOCKET_CONNECT_TIMEOUT": 1,
            "SOCKET_TIMEOUT": 1,
        },
    }
}
MIDDLEWARE = ["tests.engine.store.worker_middleware.worker_middleware", *MIDDLEWARE]
