"""Django settings for the benchmarks: the demo project's apps, a throw-away SQLite file,
django-redis on the benchmark's Redis (``REDIS_URL``), and the views of
:mod:`bench.urls` (one per limiter compared)."""

import os
import tempfile

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

DEBUG = False
ROOT_URLCONF = "bench.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(tempfile.mkdtemp(prefix="ratelimits-bench-"), "bench.sqlite3"),
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
INSTALLED_APPS = [*INSTALLED_APPS]
LOGGING = {"version": 1, "disable_existing_loggers": False}
