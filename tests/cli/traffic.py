"""What the command's tests share: traffic made with the engine (``limiter.decide``), either
on the Redis clock or at exact ``now=`` times placed relative to Redis ``TIME``, because
``keys``, ``inspect`` and ``check`` read every key at the Redis clock; and readers of what
the command prints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from django.core.management.base import CommandError

from ratelimits.engine import limiter
from ratelimits.engine.decision import Decision
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection
from ratelimits.testutils import reset_state
from ratelimits.validators import MAX_WINDOW
from tests.helpers import cells, make_policy, run

DAY = 24 * 3600


V4 = "ip:203.0.113.7"


SECRET = "s3cr3t-Token-VALUE"  # mixed case: a header value is not case-folded


def by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {r["key"]: r for r in records}
    assert len(found) == len(records), "a key was listed twice"
    return found


def refused(*args: str) -> str:
    """The message of the ``CommandError`` that ``manage.py ratelimits *args`` raises."""
    with pytest.raises(CommandError) as raised:
        run(*args)
    return str(raised.value)


def row_of(text: str, first: str) -> list[str]:
    """The table row of ``text`` whose first cell is ``first``."""
    rows = [cells(line) for line in text.splitlines() if line.startswith(first + " ")]
    assert len(rows) == 1, (first, text)
    return rows[0]


def add_policy(name: str, endpoint: str | None = None, **fields: Any) -> CompiledPolicy:
    """:func:`~tests.helpers.make_policy`'s policy (sliding_log, 5 per 60 s per address)
    on ``endpoint``, by default its name, compiled after the process forgets its state."""
    row = make_policy(name, endpoint=endpoint or name, **fields)
    reset_state()
    return CompiledPolicy.from_model(row)


def hit(policy: CompiledPolicy, who: str, now: float | None = None, times: int = 1) -> None:
    """``times`` admitted requests of ``who`` (at ``now``, else on the Redis clock)."""
    for _ in range(times):
        decision = limiter.decide([limiter.Check(policy, who)], now=now).decisions[0]
        assert decision.allowed and not decision.failed


def peek(client: redis.Redis, policy: CompiledPolicy, who: str) -> Decision:
    return limiter.peek([limiter.Check(policy, who)], client)[1].decisions[0]


def redis_now_us(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1_000_000 + int(micros)


def iso(time_us: int) -> str:
    """ISO 8601 UTC to the millisecond, written independently of the command's helper."""
    whole = datetime.fromtimestamp(time_us // 1_000_000, tz=UTC)
    return whole.strftime("%Y-%m-%dT%H:%M:%S") + f".{time_us // 1000 % 1000:03d}Z"


def mid_window(now: float) -> int:
    """A window length (>= 1 day) that ``now`` is 30 to 70 % of the way through: the
    previous window's weight is far from 0 and 1, and no boundary is near."""
    for window in range(DAY, MAX_WINDOW + 1, 3600):
        if 0.3 <= (now % window) / window <= 0.7:
            return window
    raise AssertionError("no window fits")


def all_keys(client: redis.Redis) -> set[str]:
    return {k.decode() for k in client.scan_iter(count=1000)}


def dumps(client: redis.Redis, names: Any) -> dict[str, bytes | None]:
    return {name: client.dump(name) for name in names}


def scan_calls(client: Any) -> int:
    """SCAN calls served so far, by every node of a cluster."""
    return sum(
        int(node.info("commandstats").get("cmdstat_scan", {}).get("calls", 0))
        for node in connection.node_clients(client)
    )


def counter_traffic(
    client: redis.Redis, policy: CompiledPolicy, who: str, previous: int, current: int
) -> tuple[int, float]:
    """``previous`` requests in the previous window and ``current`` in this one, at exact
    times before now; returns (the current window's start, its first request's time)."""
    now = redis_now_us(client) / 1_000_000
    start = int(now // policy.window) * policy.window
    for i in range(previous):
        hit(policy, who, now=start - policy.window + 100 + i)
    elapsed = now - start
    times = [start + elapsed * k / (current + 1) for k in range(1, current + 1)]
    for at in times:
        hit(policy, who, now=at)
    return start, times[0]


def estimate(client: redis.Redis, window: int, start: int, previous: int, current: int) -> float:
    """The sliding counter's estimate at Redis now: previous x (part of it still inside
    the sliding window) + current."""
    elapsed = redis_now_us(client) / 1_000_000 - start
    return previous * (window - elapsed) / window + current


def take(policy: CompiledPolicy, who: str, times: int = 1) -> list[Any]:
    """``times`` requests of ``who`` admitted and still in progress: their receipts."""
    receipts = []
    for _ in range(times):
        verdict = limiter.decide([limiter.Check(policy, who)])
        assert verdict.allowed and verdict.receipt is not None
        receipts.append(verdict.receipt)
    return receipts
