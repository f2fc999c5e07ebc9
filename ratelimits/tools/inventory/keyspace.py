"""Finding the limiter's keys with ``SCAN`` (every primary of a cluster) and deleting them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import redis

from ratelimits.conf import app_settings
from ratelimits.engine.keys import names as keys
from ratelimits.engine.store import connection
from ratelimits.engine.store.connection import Client
from ratelimits.engine.table import current as table

#: Keys per ``SCAN`` call (a hint to Redis) and per ``UNLINK`` batch.
SCAN_BATCH = 1000

#: ``progress(examined, found)`` is called after every ``SCAN`` call.
Progress = Callable[[int, int], None]


def key_count(client: Client) -> int:
    """How many keys the server holds (every primary's, on a cluster): ``DBSIZE``."""
    return sum(int(node.dbsize()) for node in connection.node_clients(client))


def scan(
    client: Client,
    *,
    policy: str | None = None,
    identity: str | None = None,
    identity_glob: str | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
) -> Iterator[keys.KeyName]:
    """The limiter's keys, optionally of one ``policy`` and one ``identity`` (or identities
    matching ``identity_glob``). Stops scanning once ``limit`` keys were found."""
    prefix = app_settings.KEY_PREFIX
    pattern = keys.scan_pattern(
        prefix, identity=identity, identity_glob=identity_glob, policy=policy
    )
    seen: set[str] = set()  # SCAN may return a key twice while Redis resizes its table
    examined = 0
    for node in connection.node_clients(client):
        cursor = 0
        while True:
            cursor, batch = node.scan(cursor, match=pattern, count=SCAN_BATCH)
            examined += SCAN_BATCH
            for raw in batch:
                name = keys.parse_key(raw, prefix)
                if name is None or name.key in seen:
                    continue
                if identity is not None and name.identity != identity:
                    continue  # the pattern is a prefix: ip:10.0.0.1 matched ip:10.0.0.12
                seen.add(name.key)
                yield name
                if limit is not None and len(seen) >= limit:
                    return
            if progress is not None:
                progress(examined, len(seen))
            if cursor == 0:
                break


def delete(client: Client, names: Iterable[keys.KeyName]) -> int:
    """Delete the keys (``UNLINK``, in batches); returns how many existed.

    Workers are told, through the policy table's version stamp, to forget the denials
    they remember (:mod:`ratelimits.engine.denials`), so the clients reset are let in again
    within ``POLICY_REFRESH_INTERVAL``."""
    deleted = 0
    batch: list[str] = []
    for name in names:
        batch.append(name.key)
        if len(batch) >= SCAN_BATCH:
            deleted += _unlink(client, batch)
            batch = []
    if batch:
        deleted += _unlink(client, batch)
    if deleted:
        table.mark_changed()
    return deleted


def _unlink(client: Client, batch: list[str]) -> int:
    if not connection.is_cluster(client):
        return int(client.unlink(*batch))
    # A cluster refuses a multi-key command across slots: one UNLINK per key, pipelined
    # per node.
    deleted = 0
    for node, found in by_node(client, batch, key=lambda k: k).items():
        pipe = node.pipeline(transaction=False)
        for key in found:
            pipe.unlink(key)
        deleted += sum(int(n) for n in pipe.execute())
    return deleted


def by_node(client: Client, items: list, *, key: Callable[[Any], str]) -> dict[Any, list]:
    """``items`` grouped by the node client that holds ``key(item)``, in order."""
    groups: dict[str, tuple[redis.Redis, list]] = {}
    for item in items:
        node = connection.node_client(client, key(item))
        name = connection.describe(node)
        groups.setdefault(name, (node, []))[1].append(item)
    return dict(groups.values())


def reset(client: Client, policy: str, identity: str | None = None) -> int:
    """Delete ``policy``'s keys (only ``identity``'s when given); returns how many."""
    return delete(client, scan(client, policy=policy, identity=identity))
