"""One simulation, from log files and policies to the report's record."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.tools.simulate.formats import FieldReader
from ratelimits.tools.simulate.ordering import DEFAULT_TOLERANCE, merged
from ratelimits.tools.simulate.problems import Problems
from ratelimits.tools.simulate.replay import Replay
from ratelimits.tools.simulate.report import build as build_report
from ratelimits.tools.simulate.scratch import clear, replay_prefix
from ratelimits.tools.simulate.selection import select, sweep_algorithms
from ratelimits.tools.simulate.sources import LogFile


@dataclass
class Request:
    """What to replay, and how."""

    paths: Sequence[str]
    policies: Sequence[CompiledPolicy]
    #: ``--format``: ``None`` detects each file's from its first line.
    fmt: str | None = None
    #: ``--field PART=NAME``: where a JSON or CSV log keeps a part of a request.
    fields: Mapping[str, str] = field(default_factory=dict)
    #: ``--reorder``: seconds a line may come after later ones.
    tolerance: float = DEFAULT_TOLERANCE
    limits: Sequence[int] = ()
    algorithms: Sequence[str] = ()
    #: A JSON or CSV field holding each request's cost.
    cost_field: str | None = None
    #: Clients shown per policy (``None``: all).
    top: int | None = 10


def simulate(
    request: Request,
    client: redis.Redis,
    *,
    progress: Callable[[int, float, int], None] | None = None,
) -> dict[str, Any]:
    """Replays ``request`` on ``client``'s server (scratch: see
    :func:`~ratelimits.tools.simulate.scratch.refuse_live`, which the caller runs) and
    returns the report's record. ``ValueError`` for a bad request. ``progress`` is told
    now and then the lines replayed, the seconds spent and the bytes read."""
    reader = FieldReader(request.fields)
    algorithms = sweep_algorithms(request.algorithms)
    selection = select(request.policies, limits=request.limits, algorithms=algorithms)
    problems = Problems()
    files = [
        LogFile(path, index, problems, fmt=request.fmt, reader=reader)
        for index, path in enumerate(request.paths)
    ]
    clear(client)
    replay = Replay(
        client,
        selection,
        prefix=replay_prefix(),
        cost_field=request.cost_field,
        progress=None
        if progress is None
        else lambda lines, spent: progress(lines, spent, sum(f.bytes for f in files)),
    )
    try:
        outcome = replay.run(merged(files, problems, request.tolerance))
        compared = len(algorithms) > 1
        if compared:
            replay.measure_memory()
    finally:
        clear(client)
    return build_report(outcome, problems, selection, files, top=request.top, compared=compared)
