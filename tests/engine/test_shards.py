"""Shards: one policy's budget split over several keys, for hot keys such as ``global``."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from ratelimits.engine import limiter
from ratelimits.engine.keys import names as keys
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.policy.script_args import shard_limits
from ratelimits.engine.store import connection
from ratelimits.models import Policy
from ratelimits.tools import inventory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("backend")]


def make(limit: int, shards: int, algorithm: str = "sliding_log") -> CompiledPolicy:
    row = Policy.objects.create(
        name="hot", endpoint="api:items", algorithm=algorithm, limit=limit, window=3600,
        key="global", shards=shards,
    )  # fmt: skip
    return CompiledPolicy.from_model(row)


def counts(policy: CompiledPolicy, client: Any) -> list[int]:
    """What each shard has admitted, read with the limiter's own script."""
    checks = [limiter.Check(policy, "global", shard) for shard in range(policy.shards)]
    _, verdict = limiter.peek(checks, client)
    return [int(d.count) for d in verdict.decisions]


def test_the_limit_is_split_evenly():
    assert shard_limits(50, 4) == [13, 13, 12, 12]
    assert shard_limits(8, 8) == [1] * 8
    assert shard_limits(7, 1) == [7]


def test_each_shard_has_its_own_key_and_hash_tag(client, redis_client):
    policy = make(50, 4)
    names = {policy.key_for("global", shard) for shard in range(4)}
    assert names == {f"rl:{{global@{shard}}}:hot:log" for shard in range(4)}
    parsed = keys.parse_key("rl:{global@3}:hot:log", "rl")
    assert parsed is not None and (parsed.identity, parsed.shard) == ("global", 3)
    assert keys.parse_key("rl:{global}:hot:log", "rl").shard is None  # type: ignore[union-attr]
    for _ in range(40):
        client.get("/api/items/")
    found = {n.key for n in inventory.scan(redis_client, policy="hot", identity="global")}
    assert found == names  # 40 requests at random hit all 4 shards (p of missing one < 1e-4)


@pytest.mark.parametrize("algorithm", ["sliding_log", "sliding_counter", "fixed_window"])
def test_a_flood_admits_exactly_the_limit(client, redis_client, algorithm):
    """400 requests at 50 with 4 shards: every shard fills to its share, so exactly 50
    pass (a shard receiving fewer than its 13 of 400 random requests has p < 1e-6)."""
    policy = make(50, 4, algorithm)
    if algorithm == "fixed_window":
        wait_clear_of_boundary(3600)
    codes = Counter(client.get("/api/items/").status_code for _ in range(400))
    assert codes == {200: 50, 429: 350}
    assert counts(policy, redis_client) == [13, 13, 12, 12]


def test_fewer_requests_never_exceed_the_limit_or_a_shards_share(client, redis_client):
    policy = make(50, 4)
    codes = Counter(client.get("/api/items/").status_code for _ in range(52))
    assert codes[200] <= 50 and codes[200] + codes[429] == 52
    per_shard = counts(policy, redis_client)
    assert sum(per_shard) == codes[200]
    assert all(n <= share for n, share in zip(per_shard, [13, 13, 12, 12], strict=True))
    # The stated bound: a denial means the chosen shard was full, so at least its share
    # had been admitted.
    if codes[429]:
        assert codes[200] >= 12


@pytest.mark.parametrize("backend", ["cluster"], indirect=True)
def test_on_a_cluster_the_shards_spread_over_the_primaries(redis_client):
    policy = make(50, 4)
    nodes = {
        connection.describe(connection.node_client(redis_client, policy.key_for("global", s)))
        for s in range(4)
    }
    assert len(nodes) >= 2


def test_shards_are_validated():
    with pytest.raises(ValidationError) as raised:
        Policy(name="a", endpoint="x", limit=3, window=60, shards=4).full_clean()
    assert "At most the limit (3)" in str(raised.value.message_dict["shards"])
    for bad in (0, 65):
        with pytest.raises(ValidationError) as raised:
            Policy(name="a", endpoint="x", limit=100, window=60, shards=bad).full_clean()
        assert list(raised.value.message_dict) == ["shards"]
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.create(name="a", endpoint="x", limit=3, window=60, shards=4)


def test_tools_read_each_shard_and_flag_a_changed_shard_count(redis_client):
    policy = make(8, 2)
    for shard in (0, 1):
        limiter.decide([limiter.Check(policy, "global", shard)])
    usage = list(inventory.usage(redis_client, inventory.scan(redis_client), {"hot": policy}))
    assert sorted((u.name.shard, u.count, u.remaining) for u in usage) == [(0, 1, 3), (1, 1, 3)]
    fewer = CompiledPolicy.build(
        name="hot", endpoint="api:items", algorithm="sliding_log", limit=8, window=3600,
        key="global",
    )  # fmt: skip
    check, _, note = inventory.policy_check(usage[0].name, {"hot": fewer})
    assert check is None and note == "left over: the policy now has 1 shard(s)"


def wait_clear_of_boundary(window: int, margin: float = 5.0) -> None:
    into = time.time() % window
    if into > window - margin:
        time.sleep(window - into + 0.1)
