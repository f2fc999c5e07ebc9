"""The operator's reset of one client across every policy: ``ratelimits reset --identity
ip:203.0.113.7`` (or ``username:alice``) and the admin's "lift every lock" actions.

What an operator types names a client (:func:`ratelimits.tools.identities.identity_from_text`);
its keys are those of every policy that counts it, alone or in a pair
(``n:…+ip:203.0.113.7`` for ``username+ip``), found with one ``SCAN``. An IPv6 address is
grouped by each policy's own prefix, so a key counts as the client's under the grouping
its policy uses. Deleting the keys clears the counts and lifts the locks
(``…:<policy>:lock``); :data:`ratelimits.signals.lockout_lifted` is sent for each lock
lifted, and the workers forget the denials they remember (through the table's version
stamp) within ``POLICY_REFRESH_INTERVAL``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ratelimits.engine.keys import kinds
from ratelimits.engine.keys.names import KeyName, escape_glob
from ratelimits.engine.store.connection import Client
from ratelimits.signals import lockout_lifted
from ratelimits.tools import inventory
from ratelimits.tools.identities import identity_from_text, previous_identities

logger = logging.getLogger("ratelimits")


@dataclass(frozen=True)
class Found:
    """A client's keys in every policy: what the operator typed, the identities it is
    counted as (one per IPv6 grouping in use, and under each fallback secret), and the keys."""

    asked: str
    identities: tuple[str, ...]
    names: tuple[KeyName, ...]

    @property
    def locks(self) -> tuple[KeyName, ...]:
        """The lockouts' keys among :attr:`names`."""
        return tuple(name for name in self.names if name.lock)

    @property
    def policies(self) -> list[str]:
        """The policies the client has keys in, sorted."""
        return sorted({name.policy for name in self.names})


def find(client: Client, text: str) -> Found:
    """The keys of the client ``text`` names, in every policy; ``ValueError`` with a
    readable message when ``text`` names no client."""
    policies = inventory.known_policies()
    grouped = {prefix: identity_from_text(text, prefix) for prefix in _prefixes(policies)}
    by_policy = {name: grouped[policy.ipv6_prefix] for name, policy in policies.items()}
    previous = set(previous_identities(text))
    anywhere = {identity_from_text(text), *by_policy.values(), *previous}
    found: dict[str, KeyName] = {}
    for identity in sorted(anywhere):
        # A glob around the identity finds it alone, sharded and in either half of a pair;
        # the parts are then compared whole (ip:10.0.0.1 is no part of ip:10.0.0.12).
        for name in inventory.scan(client, identity_glob=f"*{escape_glob(identity)}*"):
            own = by_policy.get(name.policy)
            theirs = anywhere if own is None else {own, *previous}
            if theirs.intersection(kinds.pair_parts(name.identity)):
                found[name.key] = name
    names = tuple(sorted(found.values(), key=lambda n: n.key))
    return Found(text.strip(), tuple(sorted(anywhere)), names)


def lift(client: Client, found: Found, sender: object, by: Any = None) -> int:
    """Delete ``found``'s keys (counts and locks); send
    :data:`~ratelimits.signals.lockout_lifted` from ``sender`` for each lock deleted
    (``by``: the admin's user). Returns how many keys existed."""
    deleted = inventory.delete(client, found.names)
    for lock in found.locks:
        results = lockout_lifted.send_robust(
            sender, policy=lock.policy, identity=lock.identity, lifted=found.asked, by=by
        )
        for receiver, result in results:
            if isinstance(result, Exception):
                logger.error(
                    "ratelimits: lockout_lifted receiver %r failed: %r",
                    receiver,
                    result,
                    exc_info=result,
                )
    return deleted


def _prefixes(policies: dict[str, Any]) -> set[int | None]:
    """The IPv6 groupings in use (``None``: the ``IPV6_PREFIX`` setting's)."""
    return {None, *(policy.ipv6_prefix for policy in policies.values())}
