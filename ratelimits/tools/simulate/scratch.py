"""The server a replay runs on: never the site's live counters.

A server holding keys under the site's ``KEY_PREFIX`` is refused unless the operator says
it is scratch; the replay's own keys live under :func:`replay_prefix` and are deleted
before and after a run.
"""

from __future__ import annotations

import redis

from ratelimits.conf import app_settings


class LiveServer(Exception):
    """The server holds the site's rate limit keys; its message says which."""


def replay_prefix() -> str:
    """The prefix of a replay's keys: apart from the site's (``rl-simulate`` for ``rl``)."""
    return f"{app_settings.KEY_PREFIX}-simulate"


def refuse_live(client: redis.Redis) -> None:
    """Raise :class:`LiveServer` when ``client``'s server holds a key under the site's
    ``KEY_PREFIX`` (SCAN, never KEYS)."""
    prefix = app_settings.KEY_PREFIX
    for key in client.scan_iter(match=f"{prefix}:*", count=10_000):
        shown = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        raise LiveServer(
            f"this server holds the site's rate limit keys (such as {shown}): a replay "
            "must not touch live counters. Name a throw-away server with --redis, leave "
            "--redis out for an embedded one, or pass --scratch if this server is scratch."
        )


def clear(client: redis.Redis) -> int:
    """Deletes the keys a replay left (:func:`replay_prefix`); returns how many."""
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{replay_prefix()}:*", count=10_000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += client.unlink(*batch)
            batch.clear()
    if batch:
        deleted += client.unlink(*batch)
    return deleted
