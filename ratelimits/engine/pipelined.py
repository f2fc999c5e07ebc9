"""Decide calls queued on a pipeline of one server (the tools read many keys at once; a
cluster's tools use each node's client): read each reply with
:func:`ratelimits.engine.decision.verdict_from`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.commands.core import Script

from ratelimits.engine.decide_protocol import arguments
from ratelimits.engine.policy.compiled import Check
from ratelimits.engine.store import caller, scripts


def queue_peek(checks: Sequence[Check], pipeline: redis.client.Pipeline) -> None:
    """Queue a read-only decide call on ``pipeline``: an ``FCALL_RO`` of the peek
    function where the server lets it run (see :func:`caller.peeks_by_function`), else
    the script."""
    if not caller.peeks_by_function(pipeline):
        queue_script(checks, pipeline, record=False, now=None)
        return
    keys = [check.key for check in checks]
    args = arguments(checks, False, None)
    pipeline.execute_command("FCALL_RO", scripts.peek_function_name(), len(keys), *keys, *args)


_script: Script | None = None


def queue_script(
    checks: Sequence[Check], pipeline: redis.client.Pipeline, *, record: bool, now: float | None
) -> Any:
    """Queue the decide script for ``checks`` (one hash slot) on ``pipeline``, recording
    or only looking, at ``now`` (seconds) or on the Redis clock: redis-py's script object
    loads it when the pipeline runs."""
    global _script
    if _script is None:
        _script = pipeline.register_script(scripts.decide_source())
    keys = [check.key for check in checks]
    return _script(keys=keys, args=arguments(checks, record, now), client=pipeline)
