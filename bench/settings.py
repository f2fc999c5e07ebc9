"""Django settings for the benchmarks: the demo project's apps and middleware, a throw-away
SQLite file, django-redis on the benchmark's Redis (``REDIS_URL``), and the views of
:mod:`bench.urls` (one per limiter compared).

``BENCH_DB`` names the SQLite file, so gunicorn workers started by :mod:`bench.e2e` read
the rows the benchmark wrote; ``python -m bench`` sets it. The other limiters compared:
django-ratelimit on the default cache, the ``limits`` library (configured in
:mod:`bench.views`), and django-smart-ratelimit's middleware with database rules on its
Redis backend, only for paths under ``/smart/`` (:class:`bench.views.SmartRatelimitMiddleware`).
"""

import os
import tempfile

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS, MIDDLEWARE

DEBUG = False
ROOT_URLCONF = "bench.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("BENCH_DB")
        or os.path.join(tempfile.mkdtemp(prefix="ratelimits-bench-"), "bench.sqlite3"),
    }
}
REDIS_URL = os.environ["REDIS_URL"]
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}
INSTALLED_APPS = [*INSTALLED_APPS, "django_smart_ratelimit"]
MIDDLEWARE = [*MIDDLEWARE, "bench.views.SmartRatelimitMiddleware"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
# One trusted proxy: the end-to-end load client plays 1,000 clients by writing their
# addresses in X-Forwarded-For (DRF's throttles read that header too). In process, the
# requests have no such header and REMOTE_ADDR is the client.
RATELIMITS = {"CACHE": "default", "NUM_PROXIES": 1}

# django-ratelimit: the default cache (django-redis), its defaults otherwise.
RATELIMIT_USE_CACHE = "default"

# django-smart-ratelimit: Redis backend, rules from its RateLimitRule table.
RATELIMIT_BACKEND = "redis"
RATELIMIT_REDIS = {"url": REDIS_URL}
RATELIMIT_USE_DYNAMIC_RULES = True
RATELIMIT_MIDDLEWARE = {"BACKEND": "redis", "DEFAULT_RATE": "1000000/h"}
