"""Settings of the demo site (``make demo``) and of the test suite.

``REDIS_URL`` (environment) points at the Redis server; ``make demo`` starts an embedded
one and sets it when it is unset. ``DATABASE_URL`` (``postgresql://...``) picks another
database; without it ``DEMO_DB`` sets the SQLite file (``project/database.py``).
"""

import os
from pathlib import Path

from project.database import from_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-not-secret-5b0d3c0e8e8a4f53")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "ratelimits",
    "project.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "ratelimits.middleware.RateLimitHeadersMiddleware",
    "ratelimits.middleware.RateLimitMiddleware",
]

# Sign-in protection first: it refuses a sign-in over a sign-in policy's limit before any
# password is checked (docs/sign-in.md).
AUTHENTICATION_BACKENDS = [
    "ratelimits.backends.RateLimitBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": from_url(
        os.environ.get("DATABASE_URL")
        or "sqlite:///" + os.environ.get("DEMO_DB", str(BASE_DIR / ".demo" / "db.sqlite3"))
    )
}

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 1, "SOCKET_TIMEOUT": 1},
    }
}

REST_FRAMEWORK = {
    "DEFAULT_THROTTLE_CLASSES": ["ratelimits.throttling.PolicyThrottle"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}

RATELIMITS = {
    "CACHE": "default",
    "NUM_PROXIES": int(os.environ.get("RATELIMITS_NUM_PROXIES", "0")),
    # Every sign-in attempt recorded (admin: Sign-in attempts), off the request path.
    "SIGN_IN_AUDIT": True,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"ratelimits": {"handlers": ["console"], "level": "INFO"}},
}

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
