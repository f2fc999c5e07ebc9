"""Test settings: the demo project's, with a file SQLite test database.

The database is a file (not ``:memory:``) so that tests can start other processes that
read the same committed rows. With ``RATELIMITS_TEST_DATABASE=postgresql``,
``tests/conftest.py`` starts a PostgreSQL server and points ``default`` at it instead. The
Redis URL is set by ``tests/conftest.py`` too, which starts the server.
"""

import os
import tempfile

from project.settings import *  # noqa: F403
from project.settings import DATABASES

_TEST_DIR = tempfile.mkdtemp(prefix="ratelimits-tests-")
DATABASES["default"]["NAME"] = os.path.join(_TEST_DIR, "db.sqlite3")
DATABASES["default"]["TEST"] = {"NAME": os.path.join(_TEST_DIR, "test.sqlite3")}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
