"""The figures of a policy's traffic that the admin's panel and ``ratelimits traffic``
show, as one JSON-ready dict (its schema is in ``docs/tuning.md``)."""

from __future__ import annotations

import re
import time
from typing import Any

import ratelimits.tools.traffic.estimate as estimate
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store.connection import Client
from ratelimits.engine.traffic.reading import read
from ratelimits.engine.traffic.record import HOURS_KEPT

#: The spans offered, in hours: the last hour, day and week.
SPANS = {"1h": 1, "24h": 24, "7d": HOURS_KEPT}
_SPAN = re.compile(r"^(\d+)([hd])$")


def parse_since(text: str) -> int:
    """Hours in a span such as ``1h``, ``24h`` or ``7d`` (at most 7 days); ``ValueError``
    otherwise."""
    match = _SPAN.match(text.strip())
    if not match:
        raise ValueError(f"a span is a number of hours or days such as 1h, 24h or 7d, not {text!r}")
    hours = int(match[1]) * (24 if match[2] == "d" else 1)
    if not 1 <= hours <= HOURS_KEPT:
        raise ValueError(f"a span is from 1h to 7d (the record keeps 7 days), not {text!r}")
    return hours


def current_limit(policy: CompiledPolicy) -> int:
    """The limit a client meets under ``policy``: a shard's share, a bucket's size."""
    return policy.capacities[0]


def traffic_report(
    client: Client,
    policy: CompiledPolicy,
    since: str = "24h",
    what_if: int | None = None,
    *,
    now: float | None = None,
) -> dict[str, Any]:
    """``policy``'s traffic over ``since`` (see :func:`parse_since`), what ``what_if``
    would have denied (``None``: the suggested limit) and the suggestion. Raises
    ``ValueError`` for a bad span or limit, Redis errors as they come."""
    hours = parse_since(since)
    if what_if is not None and what_if < 1:
        raise ValueError(f"--what-if is a limit of at least 1, not {what_if}")
    traffic = read(client, policy.name, hours, time.time() if now is None else now)
    limit = current_limit(policy)
    suggested = estimate.suggested_limit(traffic, limit)
    asked = what_if if what_if is not None else suggested
    return {
        "policy": policy.name,
        "since": since,
        "hours": hours,
        "limit": limit,
        "window": policy.window,
        "algorithm": policy.algorithm,
        "mode": "enforce" if policy.enforce else "shadow",
        "recording": policy.traffic,
        "clients": traffic.at(1),
        "requests": traffic.requests,
        "denied": traffic.denied,
        "levels": estimate.levels(traffic, limit),
        "what_if": None if asked is None else estimate.what_if(traffic, asked, limit).as_dict(),
        "suggested_limit": suggested,
        "stayed_under": estimate.share_under(traffic),
    }
