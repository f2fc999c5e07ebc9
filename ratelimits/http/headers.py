"""The IETF draft RateLimit fields (draft-ietf-httpapi-ratelimit-headers-09).

One list member per policy::

    RateLimit-Policy: "login";q=5;w=60
    RateLimit: "login";r=2;t=41

``q`` is the limit, ``w`` the window in seconds, ``r`` the remaining quota and ``t`` the
seconds (rounded up) until one more unit frees up. Decisions made without Redis (fail
mode) are left out: their numbers are unknown. So are the decisions of policies keyed by
the attempted username (:func:`counts_an_account`): their numbers are an account's, not
the client's, and would tell anyone how many guesses remain before it locks.

A face keeps the decisions it made on the Django request (:func:`attach_decisions`); the
response-header middleware writes the fields from them (:func:`decisions_of`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ratelimits.conf import app_settings
from ratelimits.engine.decision import Decision
from ratelimits.engine.keys.kinds import KEY_KINDS, describe, pair_parts

#: The Django request attribute holding the decisions made for it.
DECISIONS_ATTRIBUTE = "ratelimit_decisions"


def attach_decisions(request: Any, decisions: Iterable[Decision]) -> None:
    """Keep ``decisions`` on the Django request (a DRF request's underlying one), after
    any made earlier in the same request."""
    http_request = getattr(request, "_request", request)
    previous = getattr(http_request, DECISIONS_ATTRIBUTE, ())
    setattr(http_request, DECISIONS_ATTRIBUTE, (*previous, *decisions))


def decisions_of(request: Any) -> tuple[Decision, ...]:
    """The decisions made for ``request`` so far."""
    return getattr(request, DECISIONS_ATTRIBUTE, ())


def write(response: Any, decisions: Sequence[Decision]) -> None:
    """Put the two fields for ``decisions`` on ``response`` (unless ``HEADERS`` is off,
    or no decision has known numbers)."""
    if decisions and app_settings.HEADERS:
        policy = policy_field(decisions)
        if policy:
            response["RateLimit-Policy"] = policy
            response["RateLimit"] = ratelimit_field(decisions)


def policy_field(decisions: Iterable[Decision]) -> str:
    return ", ".join(f'"{d.policy}";q={d.limit};w={d.window}' for d in _known(decisions))


def ratelimit_field(decisions: Iterable[Decision]) -> str:
    return ", ".join(
        f'"{d.policy}";r={d.remaining};t={math.ceil(d.reset)}' for d in _known(decisions)
    )


def counts_an_account(decision: Decision) -> bool:
    """True when ``decision`` counts an account rather than the client asking: its
    identity is, or pairs, an attempted username (a sign-in policy's key kind that only a
    sign-in has, :attr:`~ratelimits.engine.keys.kinds.KeyKind.sign_in_only`)."""
    return any(describe(part) in _ACCOUNT_KINDS for part in pair_parts(decision.identity))


#: The identity kinds of an account, never the client's own (the registry's sign-in-only).
_ACCOUNT_KINDS = frozenset(kind.name for kind in KEY_KINDS.values() if kind.sign_in_only)


def _known(decisions: Iterable[Decision]) -> list[Decision]:
    seen: dict[str, Decision] = {}
    for decision in decisions:
        if not decision.failed and not counts_an_account(decision):
            seen[decision.policy] = decision  # the last decision per policy wins
    return list(seen.values())
