"""The dashboard's per-minute counts read back from Redis: the ``<prefix>:stats:<minute>``
hashes that :mod:`ratelimits.engine.reporting.stats` flushes (field ``<policy>:<outcome>``), as a
:class:`Series` per policy per minute (:func:`series`) or the recent denials per policy
(:func:`denied_since`). Only the admin reads them."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from ratelimits.conf import app_settings
from ratelimits.engine.decision import ALL_OUTCOMES, NEAR_LIMIT
from ratelimits.engine.reporting.stats import stats_key
from ratelimits.engine.store import connection

#: The outcomes the dashboard charts, in this order.
OUTCOMES = ("allowed", "denied", "shadow_denied")
#: What a minute's hash may count for a policy: every outcome, and near-limit crossings.
COUNTED = (*ALL_OUTCOMES, NEAR_LIMIT)


@dataclass(frozen=True, slots=True)
class Series:
    """Counts per policy per minute.

    ``minutes`` are minute numbers (``epoch seconds // 60``), oldest first; the last is
    the current minute. ``counts[policy][outcome]`` has one count per minute, aligned
    with ``minutes``. Every policy has at least the :data:`OUTCOMES`, zeros included;
    ``near_limit`` only when it was counted.
    """

    minutes: list[int]
    counts: dict[str, dict[str, list[int]]]

    @property
    def timestamps(self) -> list[int]:
        """The start of each minute, in seconds since the epoch."""
        return [minute * 60 for minute in self.minutes]

    @property
    def policies(self) -> list[str]:
        return sorted(self.counts)

    def of(self, policy: str) -> dict[str, list[int]]:
        """``policy``'s counts; zeros when it had no traffic."""
        found = self.counts.get(policy)
        return found if found is not None else _zeros(len(self.minutes))

    def total(self, policy: str, outcome: str) -> int:
        return sum(self.of(policy).get(outcome, ()))


def _zeros(n: int) -> dict[str, list[int]]:
    return {what: [0] * n for what in OUTCOMES}


def series(
    policies: Iterable[str] | None = None,
    minutes: int = 60,
    client: redis.Redis | None = None,
    *,
    now: float | None = None,
) -> Series:
    """The last ``minutes`` minutes (the current one included) from Redis, in one
    pipelined round trip of ``HGETALL``. ``policies=None`` gives every policy found;
    given names are all present, with zeros when they had no traffic. Uses the tools'
    client (5 s timeout) unless ``client`` is given; Redis errors are raised."""
    if minutes < 1:
        raise ValueError("minutes must be at least 1")
    client = connection.get_tool_client() if client is None else client
    current = int((time.time() if now is None else now) // 60)
    span = list(range(current - minutes + 1, current + 1))
    prefix = app_settings.KEY_PREFIX
    pipe = client.pipeline(transaction=False)
    for minute in span:
        pipe.hgetall(stats_key(minute, prefix))
    replies = pipe.execute()
    wanted = None if policies is None else set(policies)
    counts: dict[str, dict[str, list[int]]] = {}
    if wanted is not None:
        counts = {name: _zeros(minutes) for name in sorted(wanted)}
    for index, reply in enumerate(replies):
        for raw_field, raw_value in reply.items():
            parsed = _parse(raw_field, raw_value)
            if parsed is None:
                continue
            policy, what, n = parsed
            if wanted is not None and policy not in wanted:
                continue
            row = counts.get(policy)
            if row is None:
                row = counts[policy] = _zeros(minutes)
            row.setdefault(what, [0] * minutes)[index] += n
    return Series(minutes=span, counts=dict(sorted(counts.items())))


def _parse(field: bytes | str, value: bytes | str) -> tuple[str, str, int] | None:
    try:
        text = field.decode() if isinstance(field, bytes) else field
        n = int(value)
    except (UnicodeDecodeError, ValueError):
        return None
    policy, _, what = text.rpartition(":")
    if not policy or what not in COUNTED:
        return None
    return policy, what, n


def denied_since(
    minutes: int = 5,
    client: redis.Redis | None = None,
    *,
    outcomes: Iterable[str] = ("denied",),
    now: float | None = None,
) -> dict[str, int]:
    """``{policy: requests denied}`` over the last ``minutes`` minutes, the current one
    included (so up to ``minutes`` minutes plus the seconds of the current one). Policies
    with no traffic in that time are absent. ``outcomes=("denied", "failed_closed")`` also
    counts the denials of fail-closed policies while Redis was unavailable."""
    wanted = tuple(outcomes)
    read = series(minutes=minutes, client=client, now=now)
    return {
        policy: sum(sum(row.get(what, ())) for what in wanted)
        for policy, row in read.counts.items()
    }
