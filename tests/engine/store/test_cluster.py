"""The limiter on a real local Redis Cluster (3 primaries): one slot per script call,
requests that span slots, and a primary restarted mid-run.

The algorithm, throttle and command test modules also run against this cluster (see the
``backend`` fixture in ``conftest.py``); these tests cover what only a cluster has.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.management import call_command
from redis.cluster import RedisCluster

from ratelimits.conf import app_settings
from ratelimits.engine import limiter
from ratelimits.engine.keys.names import version_key
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection, scripts
from ratelimits.models import Policy
from ratelimits.testutils import RedisClusterServers, RedisServer, SlotMigration
from ratelimits.tools import inventory
from tests.helpers import decide_calls, item_statuses, libraries, server_major

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.slow,
    pytest.mark.usefixtures("backend"),
    pytest.mark.parametrize("backend", ["cluster"], indirect=True),
]


def make(name: str, limit: int, key: str, **fields: Any) -> CompiledPolicy:
    row = Policy.objects.create(
        name=name, endpoint="api:items", algorithm="sliding_log", limit=limit, window=3600,
        key=key, **fields,
    )  # fmt: skip
    return CompiledPolicy.from_model(row)


def node_of(cluster_client: RedisCluster, key: str) -> str:
    return str(cluster_client.get_node_from_key(key).name)


def server_of(redis_cluster: RedisClusterServers, client: RedisCluster, key: str) -> RedisServer:
    """The suite's server holding ``key``."""
    port = client.get_node_from_key(key).port
    (server,) = [node for node in redis_cluster.nodes if node.port == port]
    return server


def addresses_on_distinct_nodes(policy: CompiledPolicy, client: RedisCluster) -> list[str]:
    """One client address per primary, each one's key living on a different node."""
    found: dict[str, str] = {}
    for i in range(1, 250):
        ip = f"198.51.100.{i}"
        found.setdefault(node_of(client, policy.key_for(f"ip:{ip}")), ip)
    assert len(found) == 3
    return list(found.values())


def test_the_limiter_talks_to_the_cluster_and_keys_spread_over_its_primaries(
    client, redis_client, redis_cluster
):
    assert isinstance(connection.get_client(), RedisCluster)
    policy = make("items", 2, "ip")
    ips = addresses_on_distinct_nodes(policy, redis_client)
    for ip in ips:
        assert item_statuses(client, ip, 3) == [200, 200, 429]
    sizes = [node.client().dbsize() for node in redis_cluster.nodes]
    assert all(size >= 1 for size in sizes), sizes
    assert inventory.key_count(redis_client) == sum(sizes)
    found = {n.key for n in inventory.scan(redis_client, policy="items")}
    assert found == {policy.key_for(f"ip:{ip}") for ip in ips}


def test_policies_of_one_identity_are_one_call_in_one_slot(client, redis_cluster):
    make("burst", 3, "ip")
    make("hourly", 5, "ip", methods="GET")
    before = decide_calls(redis_cluster.client())
    assert item_statuses(client, "203.0.113.7", 4) == [200, 200, 200, 429]
    # One call per admitted request; the 3rd used burst's last unit, so the worker denied
    # the 4th itself (ratelimits.engine.denials).
    assert decide_calls(redis_cluster.client()) - before == 3


def test_a_request_spanning_slots_is_all_or_nothing(client, redis_cluster, redis_client):
    """A per-IP and a global policy: their keys hash to different slots. A request denied
    by one of them is recorded in neither."""
    per_ip = make("per-ip", 3, "ip")
    everyone = make("everyone", 5, "global")
    a, b = "203.0.113.7", "203.0.113.8"
    assert connection.slot_of(redis_client, per_ip.key_for(f"ip:{a}")) != connection.slot_of(
        redis_client, everyone.key_for("global")
    )
    before = decide_calls(redis_cluster.client())
    assert item_statuses(client, a, 4) == [200, 200, 200, 429]
    # An admitted request: look in both slots, then record in both. The 3rd used per-ip's
    # last unit, so the worker denied the 4th itself (ratelimits.engine.denials).
    assert decide_calls(redis_cluster.client()) - before == 3 * 4

    def count(policy: CompiledPolicy, who: str) -> float:
        _, verdict = limiter.peek([limiter.Check(policy, who)], redis_client)
        return verdict.decisions[0].count

    assert count(everyone, "global") == 3  # a's 4th request, denied per IP, took nothing
    assert item_statuses(client, b, 3) == [200, 200, 429]  # the global budget of 5 is spent
    assert count(per_ip, f"ip:{b}") == 2  # b's denied request took nothing from b
    assert count(everyone, "global") == 5


def test_a_restarted_primary_costs_only_its_own_slots(
    client, redis_client, redis_cluster, settings
):
    """Kill the primary holding one client's key: that client gets the fail mode (open:
    200), clients on the other primaries stay limited, nothing answers 500; once the node
    is back, its client is limited again. (Without remembered denials, which would keep
    the victim, denied before the kill, denied through it: see tests/engine/test_denials.py.)"""
    settings.RATELIMITS = {**settings.RATELIMITS, "LOCAL_DENIALS": 0}
    policy = make("items", 2, "ip")
    ips = addresses_on_distinct_nodes(policy, redis_client)
    victim_ip, *others = ips
    victim = server_of(redis_cluster, redis_client, policy.key_for(f"ip:{victim_ip}"))
    assert item_statuses(client, victim_ip, 3) == [200, 200, 429]

    victim.kill()
    down = item_statuses(client, victim_ip, 10)
    assert down == [200] * 10  # fail open, through the node's open breaker
    for ip in others:
        assert item_statuses(client, ip, 3) == [200, 200, 429]  # other slots keep limiting

    victim.start()  # same nodes.conf: it rejoins with its slots, empty
    redis_cluster.wait_ok()
    deadline = time.monotonic() + 10
    seen: list[int] = []
    while time.monotonic() < deadline and 429 not in seen:
        seen.append(client.get("/api/items/", REMOTE_ADDR=victim_ip).status_code)
        time.sleep(0.05)
    assert 429 in seen, "the restarted primary's client was not limited again"
    assert set(seen) <= {200, 429} and seen[-3:] == [200, 200, 429]
    # Every primary runs the library, the restarted one too (loaded again on first use).
    if server_major(redis_client) >= 7:
        for node in redis_cluster.nodes:
            assert libraries(node.client()) == [scripts.library_name()]


def test_a_slot_moving_to_a_primary_the_client_does_not_know_yet_is_decided_there(
    client, redis_client, redis_cluster
):
    """Growing a cluster: a new primary that owns no slot yet imports one (``CLUSTER
    SETSLOT ... IMPORTING``/``MIGRATING``, as ``redis-cli --cluster reshard`` does). A key
    not yet moved is answered with ASK to that primary, which redis-py's cluster client
    does not know (it owns no slot: redis-py #4015): the limiter follows the ASK itself,
    so the request is decided by Redis, on the new primary, and never answers 500."""
    policy = make("items", 2, "ip")
    ip = "198.51.100.77"
    key = policy.key_for(f"ip:{ip}")
    slot = redis_client.keyslot(key)
    owner = server_of(redis_cluster, redis_client, key)
    with joining_primary(redis_cluster) as new:
        SlotMigration(redis_cluster, [slot], new).start()
        try:
            assert item_statuses(client, ip, 3) == [200, 200, 429]
            # Decided on the new primary: the key was created there, not on the owner.
            asking = new.client().pipeline(transaction=False)
            asking.execute_command("ASKING")
            asking.zcard(key)
            assert asking.execute()[1] == 2
            assert owner.client().cluster("countkeysinslot", slot) == 0
        finally:
            owner.client().cluster("setslot", str(slot), "stable")


def test_a_slot_moved_to_a_new_primary_is_followed_by_requests_and_tools(
    client, redis_client, redis_cluster
):
    """A whole slot moved to a new primary, its key with it (what ``reshard`` does slot
    by slot), in a process whose clients knew the old layout: requests are still decided
    by Redis, against the count that moved (MOVED updates the limiter's slot map), and
    ``keys`` and ``reset`` find the key on the new primary."""
    policy = make("items", 3, "ip")
    ip = "198.51.100.78"
    key = policy.key_for(f"ip:{ip}")
    slot = redis_client.keyslot(key)
    owner = server_of(redis_cluster, redis_client, key)
    assert item_statuses(client, ip, 2) == [200, 200]
    assert key in listed_keys()  # the tools client knows the cluster as it was
    with joining_primary(redis_cluster) as new:
        redis_cluster.move_slots([slot], new)
        assert (
            new.client().exists(key) == 1 and owner.client().cluster("countkeysinslot", slot) == 0
        )
        assert item_statuses(client, ip, 2) == [200, 429]  # the third of 3, then denied
        assert new.client().zcard(key) == 3  # decided there, not by a fail mode
        # The MOVED taught the limiter's slot map: the next requests go straight there.
        assert connection.get_client().get_node_from_key(key).port == new.port
        assert key in listed_keys()
        out = io.StringIO()
        call_command(
            "ratelimits", "reset", "--policy", "items", "--identity", ip, "--yes", stdout=out
        )
        assert new.client().exists(key) == 0, out.getvalue()
        assert item_statuses(client, ip, 1) == [200]
        # Back where it was, for the tests that follow.
        redis_cluster.move_slots([slot], owner)


def listed_keys() -> list[str]:
    out = io.StringIO()
    call_command("ratelimits", "keys", "--json", stdout=out)
    return [row["key"] for row in json.loads(out.getvalue())]


@contextmanager
def joining_primary(redis_cluster: RedisClusterServers) -> Iterator[RedisServer]:
    """A new primary with no slot, joined to the suite's cluster
    (:meth:`RedisClusterServers.add_primary`); taken out again when done."""
    new = redis_cluster.add_primary()
    try:
        yield new
    finally:
        redis_cluster.remove_primary(new)


def test_the_policy_stamp_in_a_slot_moving_to_a_primary_the_client_does_not_know_is_read(
    client, redis_client, redis_cluster, settings, caplog
):
    """The policy table's version stamp is read with redis-py's own cluster client, whose
    ``ASK`` handling fails on a primary that owns no slot yet (redis-py #4015, an
    ``AttributeError``): the stamp's slot moving to a new primary, its key there already,
    is read there, and the request is answered as usual."""
    settings.RATELIMITS = {**settings.RATELIMITS, "POLICY_REFRESH_INTERVAL": 0.05}
    make("items", 2, "ip")
    ip = "198.51.100.79"
    assert item_statuses(client, ip, 1) == [200]  # the table is built, the stamp read
    stamp = version_key(app_settings.KEY_PREFIX)
    slot = redis_client.keyslot(stamp)
    owner = server_of(redis_cluster, redis_client, stamp)
    with joining_primary(redis_cluster) as new:
        migration = SlotMigration(redis_cluster, [slot], new)
        migration.start()
        migration.migrate_keys()
        try:
            assert owner.client().cluster("countkeysinslot", slot) == 0  # the stamp moved
            time.sleep(0.15)  # the next request checks the stamp
            with caplog.at_level("WARNING", logger="ratelimits"):
                assert item_statuses(client, ip, 2) == [200, 429]
            assert not [r for r in caplog.records if r.name == "ratelimits"], caplog.text
            assert connection.get_client().get(stamp) is not None  # through ASK, to the new one
        finally:
            migration.finish()
            redis_cluster.move_slots([slot], owner)  # back, for the tests that follow
