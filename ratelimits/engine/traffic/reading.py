"""The traffic record read back: a policy's hours over a span, summed, in one round trip
(a policy's hours share a hash slot)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ratelimits.engine.store.connection import Client
from ratelimits.engine.traffic.levels import LEVELS
from ratelimits.engine.traffic.record import DENIED, HOURS_KEPT, REQUESTS, traffic_key


@dataclass(frozen=True, slots=True)
class Traffic:
    """What a policy's clients did over ``hours`` hours up to ``last_hour`` (included).

    ``reached`` maps each level of :data:`~.levels.LEVELS` to how many times a client's
    use in its window climbed to it (for a fixed window, the client-windows that reached
    it); ``requests`` counts the decisions recorded, ``denied`` those the policy denied
    (enforcing, or would have in shadow)."""

    policy: str
    hours: int
    last_hour: int
    requests: int = 0
    denied: int = 0
    reached: dict[int, int] = field(default_factory=dict)

    def at(self, level: int) -> int:
        """How many times a client reached ``level`` (one of :data:`LEVELS`)."""
        return self.reached.get(level, 0)


def read(client: Client, policy: str, hours: int, now: float) -> Traffic:
    """``policy``'s record over the ``hours`` hours up to the one holding ``now`` (seconds
    since the epoch), at most :data:`HOURS_KEPT`; raises Redis errors."""
    hours = max(1, min(int(hours), HOURS_KEPT))
    last = int(now // 3600)
    pipe = client.pipeline(transaction=False)
    for hour in range(last - hours + 1, last + 1):
        pipe.hgetall(traffic_key(policy, hour))
    totals: Counter[str] = Counter()
    for found in pipe.execute():
        for name, value in found.items():
            key = name.decode() if isinstance(name, bytes) else str(name)
            totals[key] += int(value)
    reached = {level: totals[str(level)] for level in LEVELS if totals[str(level)]}
    return Traffic(policy, hours, last, totals[REQUESTS], totals[DENIED], reached)
