"""Settings of the soak's site: the demo's (:mod:`project.settings`) with the soak's own
views (:mod:`soak.urls`), on the Redis topology the run started, which the environment
names:

- ``REDIS_URL`` alone: one server;
- ``SOAK_SENTINELS`` (``host:port`` of each sentinel, by commas) and
  ``SOAK_SENTINEL_SERVICE``: the primary behind Sentinel, through django-redis's
  ``SentinelClient``;
- ``SOAK_CLUSTER_NODES`` (startup node URLs, by commas): a Redis Cluster.

The limiter keeps its defaults (a 100 ms timeout), as a production site would.
"""

import os

from project.settings import *  # noqa: F403
from project.settings import RATELIMITS

ROOT_URLCONF = "soak.urls"
DEBUG = False

_sentinels = os.environ.get("SOAK_SENTINELS", "")
if _sentinels:
    DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": f"redis://{os.environ['SOAK_SENTINEL_SERVICE']}/0",
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.SentinelClient",
                "SENTINELS": [
                    (host, int(port))
                    for host, port in (item.rsplit(":", 1) for item in _sentinels.split(","))
                ],
                "SOCKET_CONNECT_TIMEOUT": 1,
                "SOCKET_TIMEOUT": 1,
            },
        }
    }

_cluster = os.environ.get("SOAK_CLUSTER_NODES", "")
if _cluster:
    RATELIMITS = {**RATELIMITS, "CLUSTER_NODES": _cluster.split(",")}
