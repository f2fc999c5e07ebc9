"""What a replay counts for each variant: requests, admissions and denials, per client too,
and each client's peak use in a window. Counts only what the replay decided.

A client's peak is the most requests it made (admitted or not) in any window of the
policy's length, ending at one of its requests: how far it goes, whatever the limit. It
is kept with the times of the client's requests in its last window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ratelimits.tools import percentiles


@dataclass(slots=True)
class ClientTally:
    """One client's counts under one variant."""

    requests: int = 0
    admitted: int = 0
    denied: int = 0
    peak: int = 0
    #: The times (µs) of its requests in the window ending at its last one.
    recent: deque[int] = field(default_factory=deque)


@dataclass
class PolicyTally:
    """One variant's counts."""

    window_us: int
    requests: int = 0
    admitted: int = 0
    denied: int = 0
    first_denial_us: int | None = None
    clients: dict[str, ClientTally] = field(default_factory=dict)
    #: Lines this policy matched but did not count: no identity for it (a ``user``
    #: policy and a line without a user).
    uncounted: int = 0
    #: Lines this policy matched whose log does not show what it counts by.
    unshown: int = 0
    #: Lines this policy admitted that another policy of the same call denied (all or
    #: nothing: neither spent).
    denied_by_others: int = 0
    #: Against the exact algorithm of its sweep (``--algorithms``): lines it admitted
    #: where the exact one denied, and denied where that one admitted.
    admitted_not_exact: int = 0
    denied_not_exact: int = 0
    #: Mean bytes of Redis memory per client key at the end (``--algorithms``).
    memory_per_client: float | None = None

    def seen(self, client: str, at_us: int) -> ClientTally:
        """``client`` made a request at ``at_us``: its tally, its peak brought up to date."""
        found = self.clients.get(client)
        if found is None:
            found = self.clients[client] = ClientTally()
        recent = found.recent
        recent.append(at_us)
        oldest = at_us - self.window_us
        while recent[0] <= oldest:
            recent.popleft()
        if len(recent) > found.peak:
            found.peak = len(recent)
        found.requests += 1
        self.requests += 1
        return found

    def decided(self, client: ClientTally, allowed: bool, at_us: int) -> None:
        """The replay's decision on ``client``'s request at ``at_us``."""
        if allowed:
            client.admitted += 1
            self.admitted += 1
        else:
            client.denied += 1
            self.denied += 1
            if self.first_denial_us is None:
                self.first_denial_us = at_us

    @property
    def clients_denied(self) -> int:
        return sum(1 for client in self.clients.values() if client.denied)

    def peaks(self) -> dict[str, int]:
        """The clients' peaks per window: p50, p90, p99 and max."""
        return percentiles.summary(client.peak for client in self.clients.values())

    def top(self, count: int | None) -> list[tuple[str, ClientTally]]:
        """The ``count`` clients with the most denials, then the most requests (``None``:
        every client)."""
        ranked = sorted(
            self.clients.items(), key=lambda item: (-item[1].denied, -item[1].requests, item[0])
        )
        return ranked if count is None else ranked[:count]
