"""What another limit would have done, estimated from a policy's traffic record, with the
range the record guarantees; and the suggested limit. Pure: no I/O.

Let ``C(k)`` be how many clients (client-windows) reached a use of ``k`` in a window. For
every whole ``N``::

    clients over N   = C(N + 1)
    requests over N  = C(N + 1) + C(N + 2) + ... + C(limit) + denied

(a client-window that used ``u`` units has ``u - N`` of them over ``N``; those the
current limit already denied, ``denied``, are over any lower limit too). The record knows
``C`` only at the levels of the scale, and ``C`` falls as ``k`` grows, so each unknown
``C(k)`` lies between ``C`` at the level above ``k`` and ``C`` at the level below: that
gives the bounds; the estimate interpolates linearly between the two levels. Nothing is
known past the current limit (a denied request is not counted in its window): for a
limit at or above it the bounds are ``[0, what the limit denied]`` (exactly 0 when it
denied nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ratelimits.engine.traffic.levels import LEVELS, at_or_above, at_or_below, readable
from ratelimits.engine.traffic.reading import Traffic

#: The suggested limit: the level 99 % of the clients stayed under ...
SUGGESTION_SHARE = 0.99
#: ... times this headroom, rounded up to a level.
HEADROOM = 1.5


@dataclass(frozen=True, slots=True)
class WhatIf:
    """What ``limit`` would have denied: clients (client-windows) and requests, each an
    estimate and the range ``(low, high)`` the record guarantees. ``observed`` is False
    for a limit at or above the current one with denials: the record cannot see past the
    current limit, and the range is all it can say."""

    limit: int
    clients_denied: int
    clients_denied_bounds: tuple[int, int]
    requests_denied: int
    requests_denied_bounds: tuple[int, int]
    observed: bool = True

    def as_dict(self) -> dict[str, object]:
        return {
            "limit": self.limit,
            "clients_denied": self.clients_denied,
            "clients_denied_bounds": list(self.clients_denied_bounds),
            "requests_denied": self.requests_denied,
            "requests_denied_bounds": list(self.requests_denied_bounds),
            "observed": self.observed,
        }


def reached(traffic: Traffic, k: int, limit: int) -> tuple[float, int, int]:
    """``C(k)``: ``(estimate, low, high)`` for a whole ``k`` from 1 to ``limit``."""
    below = at_or_below(k) or 1
    above = at_or_above(k)
    high = traffic.at(below)
    if below == k:
        return float(high), high, high
    low = traffic.at(above) if above <= limit else 0
    top = above if above <= limit else limit + 1
    share = (k - below) / (top - below)
    return high - (high - low) * share, low, high


def what_if(traffic: Traffic, limit: int, current: int) -> WhatIf:
    """What ``limit`` would have denied of ``traffic``, recorded under the ``current``
    limit (the policy's, per client or per shard)."""
    if limit < 1:
        raise ValueError(f"a limit is at least 1, not {limit}")
    denied = traffic.denied
    if limit >= current:
        if not denied:
            return WhatIf(limit, 0, (0, 0), 0, (0, 0))
        at_limit = traffic.at(at_or_below(current) or 1)
        clients_high = min(at_limit, denied) if at_limit else denied
        if limit == current:
            return WhatIf(limit, clients_high, (1, clients_high), denied, (denied, denied))
        return WhatIf(
            limit,
            math.ceil(clients_high / 2),
            (0, clients_high),
            math.ceil(denied / 2),
            (0, denied),
            observed=False,
        )
    clients, clients_low, clients_high = reached(traffic, limit + 1, current)
    requests, requests_low, requests_high = float(denied), denied, denied
    for k in range(limit + 1, current + 1):
        estimate, low, high = reached(traffic, k, current)
        requests += estimate
        requests_low += low
        requests_high += high
    return WhatIf(
        limit,
        round(clients),
        (clients_low, clients_high),
        round(requests),
        (requests_low, requests_high),
    )


def levels(traffic: Traffic, current: int) -> list[dict[str, int]]:
    """``[{"at_least": level, "clients": C(level)}]`` for every level from 1 to the first
    one past the highest reached (and at least to the current limit's)."""
    top = max([k for k, n in traffic.reached.items() if n] or [1])
    last = at_or_above(max(top, min(current, LEVELS[-1])))
    return [{"at_least": k, "clients": traffic.at(k)} for k in LEVELS if k <= last]


def share_under(traffic: Traffic, share: float = SUGGESTION_SHARE) -> int | None:
    """The lowest level that at least ``share`` of the clients stayed under (their use
    in a window never reached it); ``None`` without clients."""
    clients = traffic.at(1)
    if not clients:
        return None
    allowed = clients * (1 - share)
    for level in LEVELS:
        if traffic.at(level) <= allowed:
            return level
    return LEVELS[-1]


def suggested_limit(traffic: Traffic, current: int) -> int | None:
    """:data:`HEADROOM` times the level :data:`SUGGESTION_SHARE` of the clients stayed
    under, rounded up to a level; ``None`` without clients. When that level is past the
    current limit (more than 1 % of the clients reached it), the record cannot see how
    far they went: the suggestion is then the current limit times the headroom, a floor
    to try in shadow."""
    level = share_under(traffic)
    if level is None:
        return None
    return readable(min(level, current + 1) * HEADROOM)
