"""The pytest fixtures of :mod:`~.policies` (pytest-django's ``db`` under them): bring them
into a project's ``conftest.py`` with ``from ratelimits.testutils import
ratelimits_policies, ratelimits_policy_file``, or ``pytest_plugins =
["ratelimits.testing.fixtures"]``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ratelimits.testing.policies import PolicyFile, policies_for_test


@pytest.fixture
def ratelimits_policy_file() -> PolicyFile | None:
    """The policy file ``ratelimits_policies`` loads; ``None`` (the default): the test
    database's policies. Override it in a ``conftest.py`` to return the path of the plan
    ``adopt --output`` wrote."""
    return None


@pytest.fixture
def ratelimits_policies(db: None, ratelimits_policy_file: PolicyFile | None) -> Iterator[list[str]]:
    """The test runs under the policies of ``ratelimits_policy_file`` with no counters,
    the table built in the test's thread; the counters are cleared after it too. The
    value is the policies' names."""
    with policies_for_test(ratelimits_policy_file) as names:
        yield names
