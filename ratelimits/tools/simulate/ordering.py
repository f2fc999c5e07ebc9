"""Several logs as one stream in time order.

Logs written by several workers interleave by a few seconds: each file's lines pass
through a buffer that holds them for ``tolerance`` seconds of log time and lets them out
in time order. A line older than one already let out (out of order by more than the
tolerance) is skipped and counted. The files' ordered streams are then merged. Memory:
the lines of ``tolerance`` seconds per file, whatever the logs' length.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from ratelimits.tools.simulate.problems import Problems
from ratelimits.tools.simulate.sources import Entry, LogFile

#: Seconds of log time a line may come after later ones and still be replayed in order.
DEFAULT_TOLERANCE = 5.0


def in_order(
    file: LogFile, entries: Iterable[Entry], tolerance_us: int, problems: Problems
) -> Iterator[tuple[int, int, int, Entry]]:
    """``file``'s entries in time order as ``(time_us, source, sequence, entry)``: held up to
    ``tolerance_us`` behind the newest seen; older ones than an entry let out are skipped."""
    held: list[tuple[int, int, int, Entry]] = []
    newest = None
    released = None
    for sequence, entry in enumerate(entries):
        at = entry.line.time_us
        if released is not None and at < released:
            late = (released - at) / 1_000_000
            problems.skip(
                file.name,
                entry.number,
                f"out of order: {late:.3f} s before a line already replayed "
                f"(tolerance {tolerance_us / 1_000_000:g} s; raise --reorder)",
            )
            continue
        heapq.heappush(held, (at, file.index, sequence, entry))
        if newest is None or at > newest:
            newest = at
        while held and held[0][0] <= newest - tolerance_us:
            item = heapq.heappop(held)
            released = item[0]
            yield item
    while held:
        yield heapq.heappop(held)


def merged(
    files: list[LogFile], problems: Problems, tolerance: float = DEFAULT_TOLERANCE
) -> Iterator[Entry]:
    """Every file's entries, merged in time order (ties: file order, then line order)."""
    tolerance_us = round(tolerance * 1_000_000)
    streams = [in_order(file, file.entries(), tolerance_us, problems) for file in files]
    if len(streams) == 1:
        return (item[3] for item in streams[0])
    return (item[3] for item in heapq.merge(*streams))
