"""Reads that describe one moment: one transaction on a server, or, where a full server
refuses a transaction (``OOM``: Redis 7 turns a ``MULTI`` down while memory is over
``maxmemory`` under ``noeviction``), the same reads back to back, which a full server
still answers. The tools read what they show this way, so they keep working when Redis
is full, which is when an operator needs them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis


def read_together(node: redis.Redis, queue: Callable[[Any], None]) -> list[Any]:
    """The replies of the reads ``queue`` puts on a pipeline of ``node``, in one
    transaction if the server takes one; error replies come back in the list."""
    pipe = node.pipeline(transaction=True)
    queue(pipe)
    try:
        return pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]
    except redis.exceptions.OutOfMemoryError:
        pipe = node.pipeline(transaction=False)
        queue(pipe)
        return pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]
