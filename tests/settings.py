"""Test settings: the demo project's, with a file SQLite test database.

The database is a file (not ``:memory:``) so that tests can start other processes that
read the same committed rows. With ``RATELIMITS_TEST_DATABASE=postgresql`` the database is a
PostgreSQL server on a free port, which ``tests/conftest.py`` starts. The Redis URL is set
by ``tests/conftest.py`` too, which starts the server.
"""

import os
import tempfile

from project.settings import *  # noqa: F403
from project.settings import DATABASES, INSTALLED_APPS, RATELIMITS
from ratelimits.testutils import free_port
from tests.postgres import settings_entry

DATABASE = os.environ.get("RATELIMITS_TEST_DATABASE", "sqlite")
if DATABASE == "postgresql":
    # tests/conftest.py starts the server on this port before the first connection.
    DATABASES["default"] = settings_entry(free_port())
elif DATABASE == "sqlite":
    _TEST_DIR = tempfile.mkdtemp(prefix="ratelimits-tests-")
    DATABASES["default"] = {  # whatever DATABASE_URL says: the tests make their own
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(_TEST_DIR, "db.sqlite3"),
        "TEST": {"NAME": os.path.join(_TEST_DIR, "test.sqlite3")},
    }
else:
    raise ValueError(f"RATELIMITS_TEST_DATABASE={DATABASE!r}: use sqlite or postgresql")
# DRF's TokenAuthentication, for the API-client tests (tests/faces/test_api_clients.py).
INSTALLED_APPS = [*INSTALLED_APPS, "rest_framework.authtoken"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The sign-in audit's writer thread would write outside each test's transaction: its
# tests (tests/security/test_sign_in_audit.py) turn it on and flush themselves.
RATELIMITS = {**RATELIMITS, "SIGN_IN_AUDIT": False}
LOGGING = {"version": 1, "disable_existing_loggers": False}
