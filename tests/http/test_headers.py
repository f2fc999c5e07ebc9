"""The RateLimit-Policy and RateLimit field values built from decisions."""

from __future__ import annotations

from typing import Any

import pytest

from ratelimits.engine.decision import Decision
from ratelimits.engine.keys.identity import username_identity
from ratelimits.http.headers import counts_an_account, policy_field, ratelimit_field


def decision(policy: str = "login", **changes: Any) -> Decision:
    """An allowed decision of ``policy``: 5 per 60 s, 2 left, 40.2 s until a unit frees up."""
    values: dict[str, Any] = {
        "policy": policy,
        "identity": "ip:203.0.113.7",
        "allowed": True,
        "enforce": True,
        "limit": 5,
        "window": 60,
        "count": 2.0,
        "remaining": 2,
        "retry_after": 0.0,
        "reset": 40.2,
    }
    return Decision(**{**values, **changes})


def test_one_policy() -> None:
    assert policy_field([decision()]) == '"login";q=5;w=60'
    assert ratelimit_field([decision()]) == '"login";r=2;t=41'


@pytest.mark.parametrize(
    ("reset", "t"), [(40.2, 41), (40.0, 40), (0.001, 1), (0.0, 0), (59.999, 60)]
)
def test_t_is_rounded_up_to_whole_seconds(reset: float, t: int) -> None:
    assert ratelimit_field([decision(reset=reset)]) == f'"login";r=2;t={t}'


def test_a_denied_decision_shows_no_quota_left() -> None:
    denied = decision(allowed=False, remaining=0, retry_after=12.5, reset=12.5)
    assert ratelimit_field([denied]) == '"login";r=0;t=13'
    assert policy_field([denied]) == '"login";q=5;w=60'


def test_several_policies_are_joined_in_order() -> None:
    decisions = [
        decision("login"),
        decision("burst", limit=10, window=1, remaining=9, reset=0.5),
        decision("daily", limit=1000, window=86400, remaining=997, reset=3600),
    ]
    assert policy_field(decisions) == '"login";q=5;w=60, "burst";q=10;w=1, "daily";q=1000;w=86400'
    assert ratelimit_field(decisions) == '"login";r=2;t=41, "burst";r=9;t=1, "daily";r=997;t=3600'


def test_failed_decisions_are_left_out() -> None:
    failed = decision("fallback", failed=True, limit=7, window=7, remaining=0, reset=0)
    decisions = [failed, decision("login")]
    assert policy_field(decisions) == '"login";q=5;w=60'
    assert ratelimit_field(decisions) == '"login";r=2;t=41'


def test_only_failed_decisions_give_empty_fields() -> None:
    decisions = [decision(failed=True), decision("other", failed=True)]
    assert policy_field(decisions) == ""
    assert ratelimit_field(decisions) == ""
    assert policy_field([]) == ""


def test_one_member_per_policy_the_last_decision_wins() -> None:
    decisions = [decision(remaining=3, reset=50), decision("other"), decision(remaining=1)]
    assert policy_field(decisions) == '"login";q=5;w=60, "other";q=5;w=60'
    assert ratelimit_field(decisions) == '"login";r=1;t=41, "other";r=2;t=41'


def test_a_generator_is_read_once() -> None:
    decisions = (d for d in [decision("a"), decision("b")])
    assert policy_field(decisions) == '"a";q=5;w=60, "b";q=5;w=60'


def test_a_policy_keyed_by_username_tells_nobody_its_numbers() -> None:
    """A sign-in policy counting the attempted username: its remaining count is how many
    guesses are left before that account locks, so neither field names it (an address
    policy decided beside it still shows)."""
    account = decision("signin-username", identity=username_identity("victim"), remaining=1)
    address = decision("signin-address")
    assert counts_an_account(account)
    assert not counts_an_account(address)
    assert policy_field([account, address]) == '"signin-address";q=5;w=60'
    assert ratelimit_field([account, address]) == '"signin-address";r=2;t=41'
    assert ratelimit_field([account]) == ""
