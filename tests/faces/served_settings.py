"""Settings of the demo site as the tests serve it (:mod:`tests.site_settings`), with the
test-only views of ``tests/faces/served_site.py``, for servers that
``tests/faces/test_after_response_served.py`` starts; the database and Redis come from
the environment (``tests.served.site_env``)."""

from tests.site_settings import *  # noqa: F403
from tests.site_settings import MIDDLEWARE

ROOT_URLCONF = "tests.faces.served_site"
MIDDLEWARE = ["tests.faces.served_site.served_by", *MIDDLEWARE]
# The tests' hasher: users the tests create sign in here.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
