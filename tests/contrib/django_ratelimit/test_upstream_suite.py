"""django-ratelimit 4.1.0's own ``tests.py`` (52 tests), run unchanged against
``ratelimits.contrib.django_ratelimit`` on the suite's real Redis, in both block modes.

The file is read from the installed django-ratelimit (a development requirement), never
copied here; its sha256 is pinned (:data:`~tests.contrib.django_ratelimit.upstream.TESTS_SHA256`),
so that another version fails loudly instead of being scored. The score is asserted as
the exact set of tests that do not pass: a regression fails, and so does a new pass (the
list, and docs/django-ratelimit.md, are then updated).
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.contrib.django_ratelimit.upstream import run_upstream, upstream_caches
from tests.helpers.redis_setup import ratelimits_settings

#: What differs in both modes, with the reason (docs/django-ratelimit.md, "The score").
DIFFERENT = {
    # A request over the limit spends nothing here: after two increments at 1/m the
    # counter holds 1, where django-ratelimit's holds 2.
    "FunctionsTests.test_not_increment_after_increment",
}
#: What differs only when a blocked request gets ratelimits' 429 (the default): the
#: view answers the 429 instead of raising ``Ratelimited``.
DIFFERENT_WHEN_429 = {"RatelimitTests.test_block"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("block", ["raise", "429"])
def test_upstream_suite_passes_all_but_the_documented_differences(block: str) -> None:
    # The upstream tests empty the counters with cache.clear() before each test: the
    # worker's remembered denials (LOCAL_DENIALS) would outlive that.
    chosen = ratelimits_settings(DJANGO_RATELIMIT_BLOCK=block, LOCAL_DENIALS=0)
    with override_settings(CACHES=upstream_caches(), RATELIMITS=chosen):
        names, failed = run_upstream()
    expected = DIFFERENT | (DIFFERENT_WHEN_429 if block == "429" else set())
    assert len(names) == 52
    assert set(failed) == expected, failed
    assert len(names) - len(failed) >= 50
