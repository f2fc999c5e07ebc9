"""Valkey 9's atomic slot migration under load: ``CLUSTER MIGRATESLOTS`` moves half the
slots, the hot key's among them, to a primary added while gunicorn answers 16 client
threads, as ``test_cluster_growth`` does with the classic steps of ``redis-cli --cluster
reshard`` (the same site, load, policies and invariants: exactly the limit admitted, no
5xx, Redis deciding every request).

The source streams the slots' keys and then hands them over at once: no ``ASK`` window,
no ``MIGRATE`` batches. Skipped on a server without the command (Redis, Valkey before 9).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from redis.cluster import RedisCluster

from ratelimits.testutils import RedisClusterServers, RedisServer, node_id
from tests.engine.store.test_cluster_growth import (
    CLIENTS,
    HEADER,
    SOCKET_TIMEOUT,
    announce_new_version,
    count,
    half_of_each,
    hashed,
    policy,
    run_rounds,
    wait_for_policies,
)
from tests.engine.store.test_cluster_growth import cluster as cluster
from tests.engine.store.test_cluster_growth import site as site
from tests.engine.store.test_cluster_growth import tools_on_cluster as tools_on_cluster
from tests.served import Site

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: A client's admitted rounds: one before, one adding the primary, the migration's
#: rounds, two after it.
MIGRATION_ROUNDS = 4
LIMIT = 1 + 1 + MIGRATION_ROUNDS + 2
ROUNDS = LIMIT + 3


def has_atomic_migration(node: RedisServer) -> bool:
    """Whether the server knows ``CLUSTER MIGRATESLOTS`` (Valkey 9+): ``CLUSTER HELP``
    lists it."""
    lines = node.client().execute_command("CLUSTER", "HELP")
    return any(line.split()[:1] == [b"MIGRATESLOTS"] for line in lines)


def ranges(slots: list[int]) -> list[tuple[int, int]]:
    """Consecutive ``slots`` as (first, last) ranges."""
    out: list[tuple[int, int]] = []
    for slot in sorted(slots):
        if out and out[-1][1] == slot - 1:
            out[-1] = (out[-1][0], slot)
        else:
            out.append((slot, slot))
    return out


class AtomicMigration:
    """``CLUSTER MIGRATESLOTS SLOTSRANGE ... NODE <target>`` on each owner of ``slots``;
    :meth:`wait` polls ``CLUSTER GETSLOTMIGRATIONS`` until every job succeeded."""

    def __init__(self, cluster: RedisClusterServers, slots: list[int], target: RedisServer):
        owners = cluster.owners()
        self.target = target
        self.sources: dict[RedisServer, list[int]] = {}
        for slot in slots:
            self.sources.setdefault(owners[slot], []).append(slot)

    def start(self) -> None:
        target = node_id(self.target)
        for source, slots in self.sources.items():
            bounds = [bound for pair in ranges(slots) for bound in pair]
            reply = source.client().execute_command(
                "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", *bounds, "NODE", target
            )
            assert reply in (b"OK", "OK", True), reply

    def wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for source in self.sources:
            while True:
                jobs = source.client().execute_command("CLUSTER", "GETSLOTMIGRATIONS")
                states = [job[b"state"] for job in jobs if job[b"operation"] == b"EXPORT"]
                assert b"failed" not in states and b"cancelled" not in states, jobs
                if states and all(state == b"success" for state in states):
                    break
                assert time.monotonic() < deadline, jobs
                time.sleep(0.05)


def test_half_the_slots_moved_atomically_under_load(
    site: Site,
    cluster: RedisClusterServers,
    tools_on_cluster: RedisCluster,
) -> None:
    if not has_atomic_migration(cluster.nodes[0]):
        pytest.skip("the server has no CLUSTER MIGRATESLOTS (Valkey 9+)")
    client = tools_on_cluster
    per_client = policy("per-client", LIMIT, f"header:{HEADER}")
    everyone = policy("everyone", 1_000_000, "global")
    announce_new_version(client)
    wait_for_policies(site, ["per-client", "everyone"])
    everyone_before = count(everyone, "global", client)

    names = [f"client-{n}" for n in range(CLIENTS)]
    keys = [per_client.key_for(hashed(name, HEADER)) for name in names]
    moving = half_of_each(cluster)
    assert client.keyslot(everyone.key_for("global")) in moving
    grown: dict[str, object] = {}

    def add_primary() -> None:
        grown["new"] = cluster.add_primary()

    def begin() -> None:
        new = grown["new"]
        assert isinstance(new, RedisServer)
        grown["migration"] = AtomicMigration(cluster, moving, new)
        grown["migration"].start()

    def wait() -> None:
        migration = grown["migration"]
        assert isinstance(migration, AtomicMigration)
        migration.wait()

    steps: list[Callable[[], None]] = [lambda: None, add_primary, begin, lambda: None, wait]
    steps += [lambda: None] * (ROUNDS - len(steps))
    rounds = run_rounds(site, names, steps)
    samples = rounds.samples
    new = grown["new"]
    assert isinstance(new, RedisServer)

    statuses = Counter(s.status for s in samples)
    slowest = max(s.seconds for s in samples)
    assert len(samples) == CLIENTS * ROUNDS
    assert set(statuses) <= {200, 429}, statuses
    assert slowest < SOCKET_TIMEOUT, f"a request took {slowest:.3f} s"
    undecided = [s for s in samples if "per-client" not in s.decided]
    assert not undecided, f"{len(undecided)} took the fail mode: {undecided[:3]}"

    owners = cluster.owners()
    moved = [n for n, key in enumerate(keys) if owners[client.keyslot(key)] is new]
    assert 0 < len(moved) < CLIENTS
    for n, name in enumerate(names):
        seen = [s.status for s in sorted(samples, key=lambda s: s.round) if s.client == n]
        assert seen == [200] * LIMIT + [429] * (ROUNDS - LIMIT), (name, n in moved, seen)
        assert count(per_client, hashed(name, HEADER), client) == LIMIT, name
    assert count(everyone, "global", client) - everyone_before == CLIENTS * LIMIT
    assert owners[client.keyslot(everyone.key_for("global"))] is new
    assert sorted(s for s, owner in owners.items() if owner is new) == moving
    assert all(new.client().exists(keys[n]) for n in moved)
    print(
        f"\n{len(samples)} requests: {dict(statuses)}; slowest {slowest * 1000:.0f} ms; "
        f"{len(moved)} of {CLIENTS} clients moved; {len(moving)} slots moved atomically in "
        f"{rounds.step_seconds[2] + rounds.step_seconds[4]:.2f} s of commands",
        end="",
    )
