"""django-ratelimit's own ``tests.py``, loaded from the installed package with its
``django_ratelimit`` imports answered by ``ratelimits.contrib.django_ratelimit``, and run.

Nothing of django-ratelimit is copied here: :func:`upstream_suite` reads the file the
installed wheel ships (``django_ratelimit/tests.py``), after checking its sha256
(:data:`TESTS_SHA256`, django-ratelimit 4.1.0's), so that another upstream version is
noticed rather than scored. While the suite is loaded and run (:func:`aliased`),
``django_ratelimit`` and its submodules in ``sys.modules`` are the compat's modules, and
``django_ratelimit.tests`` is the upstream file itself: its dotted paths
(``django_ratelimit.tests.mykey``) resolve to its own functions.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import unittest
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from django.conf import settings

from ratelimits.testutils import free_port

#: django-ratelimit 4.1.0's ``django_ratelimit/tests.py``: 52 tests.
TESTS_SHA256 = "b5d46a9e2fd0529ad2c63078eef9ccd53dae997fffe5a74434d01b5401be42e5"
#: The package the upstream tests import, and the compat that answers for it.
UPSTREAM = "django_ratelimit"
COMPAT = "ratelimits.contrib.django_ratelimit"
#: The submodules the upstream tests import (``from django_ratelimit.core import ...``).
SUBMODULES = ("decorators", "exceptions", "core", "middleware")


def upstream_tests_file() -> Path:
    """The installed ``django_ratelimit/tests.py``; ``AssertionError`` when it is not the
    version :data:`TESTS_SHA256` pins."""
    if UPSTREAM in sys.modules and sys.modules[UPSTREAM].__name__ == COMPAT:
        raise RuntimeError("the upstream package is aliased: find its tests before")
    spec = importlib.util.find_spec(UPSTREAM)
    assert spec is not None and spec.origin is not None, "django-ratelimit is not installed"
    path = Path(spec.origin).with_name("tests.py")
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    assert found == TESTS_SHA256, (
        f"{path} is not django-ratelimit 4.1.0's tests.py (sha256 {found}): score the new "
        "version, then update TESTS_SHA256 and the expected failures"
    )
    return path


@contextmanager
def aliased() -> Iterator[None]:
    """``django_ratelimit`` (and its submodules) in ``sys.modules`` as the compat's, put
    back as they were afterwards."""
    names = [UPSTREAM, *(f"{UPSTREAM}.{name}" for name in (*SUBMODULES, "tests"))]
    saved = {name: sys.modules.get(name) for name in names}
    try:
        sys.modules[UPSTREAM] = importlib.import_module(COMPAT)
        for name in SUBMODULES:
            sys.modules[f"{UPSTREAM}.{name}"] = importlib.import_module(f"{COMPAT}.{name}")
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_upstream(path: Path) -> ModuleType:
    """The upstream tests module at ``path``, loaded as ``django_ratelimit.tests`` (call
    inside :func:`aliased`)."""
    name = f"{UPSTREAM}.tests"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def upstream_caches() -> dict[str, Any]:
    """``CACHES`` with the caches the upstream tests name in ``RATELIMIT_USE_CACHE``, as
    django-ratelimit's own test settings describe them: two that cannot connect (a Redis
    on a port nothing listens on), one that keeps nothing (Django's dummy cache). The
    default cache stays the limiter's Redis, which the tests' ``cache.clear()`` empties;
    ``fake-cache`` is left out (a test expects it missing)."""
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    failing = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": nowhere}
    return {
        **settings.CACHES,
        "connection-errors": failing,
        "connection-errors-redis": {**failing, "OPTIONS": {"IGNORE_EXCEPTIONS": True}},
        "instant-expiration": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
    }


def run_upstream() -> tuple[list[str], dict[str, str]]:
    """Run the upstream suite: the names of its tests (``Class.test``), and for each that
    did not pass, why (its traceback's last line)."""
    path = upstream_tests_file()  # before the alias hides the installed package
    with aliased():
        module = load_upstream(path)
        suite = unittest.defaultTestLoader.loadTestsFromModule(module)
        names = [_name(test) for test in _flat(suite)]
        result = unittest.TestResult()
        suite.run(result)
    failed = {
        _name(test): trace.strip().splitlines()[-1]
        for test, trace in (*result.failures, *result.errors)
    }
    failed.update({_name(test): "unexpected success" for test in result.unexpectedSuccesses})
    return names, failed


def _flat(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flat(item)
        else:
            yield item


def _name(test: Any) -> str:
    return f"{type(test).__name__}.{test._testMethodName}"
