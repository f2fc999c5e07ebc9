"""An endpoint listing several names (``accounts,api:payments``): one policy, one counter,
matched by each listed throttle scope or URL name, once per request; a list holds names
only, never a glob or an empty name."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table.policy_table import PolicyTable
from ratelimits.validators import endpoint_names, validate_endpoint


def policy(name: str, endpoint: str) -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name, endpoint=endpoint, algorithm="sliding_log", limit=5, window=60
    )


def names(found: list[CompiledPolicy]) -> list[str]:
    return [p.name for p in found]


def test_each_listed_name_matches_and_a_request_meeting_two_of_them_gets_the_policy_once():
    table = PolicyTable(
        [policy("burst", "accounts,api:payments"), policy("payments", "api:payments")]
    )
    assert names(table.match(method="GET", path="/accounts/", url_name="accounts")) == ["burst"]
    assert names(table.match(method="GET", path="/x/", scope="accounts")) == ["burst"]
    paid = table.match(method="POST", path="/p/", url_name="api:payments")
    assert names(paid) == ["burst", "payments"]
    both = table.match(method="GET", path="/a/", scope="accounts", url_name="api:payments")
    assert names(both) == ["burst", "payments"]
    assert table.match(method="GET", path="/other/", url_name="accounts,api:payments") == []


def test_a_table_built_from_the_previous_one_forgets_a_list_that_changed():
    before = PolicyTable([policy("burst", "accounts,transactions")])
    after = PolicyTable([policy("burst", "accounts")], previous=before)
    assert names(after.match(method="GET", path="/a/", url_name="accounts")) == ["burst"]
    assert after.match(method="GET", path="/t/", url_name="transactions") == []


def test_a_glob_is_never_split_and_a_name_is_one_name():
    assert endpoint_names("/api/a,b/*") == ()
    assert endpoint_names("search") == ("search",)
    assert endpoint_names("accounts,api:payments") == ("accounts", "api:payments")


@pytest.mark.parametrize("endpoint", ["accounts,/api/*", "accounts,,payments", "accounts,"])
def test_a_list_holding_a_glob_or_an_empty_name_is_refused_with_the_reason(endpoint):
    with pytest.raises(ValidationError) as raised:
        validate_endpoint(endpoint)
    assert raised.value.code == "invalid_endpoint_list"
    assert "A path glob stands alone" in raised.value.messages[0]
