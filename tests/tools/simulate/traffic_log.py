"""A generated access log and the exact answers a plain Python limiter gives for it.

Honest clients send now and then; abusers send bursts. The reference limiters below are
written here, independently of the Lua scripts: an exact sliding log and a fixed window
aligned on the epoch, admitting only what fits and storing only what they admit.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

START = 1_795_000_000  # 2026-11-19, a whole second


@dataclass(frozen=True)
class Hit:
    time_us: int
    address: str
    path: str = "/api/search/"
    method: str = "GET"
    status: int = 200


def generated(seed: int = 7, minutes: int = 6) -> list[Hit]:
    """Honest clients (a request every 2 to 20 s) and bursty abusers (40 requests in 2 s,
    every 25 s), at microsecond times, in time order; no two at the same microsecond."""
    rng = random.Random(seed)
    end = START + minutes * 60
    hits = []
    for n in range(25):
        at = START + rng.uniform(0, 10)
        while at < end:
            hits.append(Hit(round(at * 1_000_000), f"198.51.100.{n + 1}"))
            at += rng.uniform(2, 20)
    for n in range(3):
        burst = START + rng.uniform(0, 20)
        while burst < end:
            for _ in range(40):
                at = burst + rng.uniform(0, 2)
                hits.append(Hit(round(at * 1_000_000), f"203.0.113.{n + 1}"))
            burst += 25
    hits.sort(key=lambda hit: hit.time_us)
    times = [hit.time_us for hit in hits]
    assert len(set(times)) == len(times)
    return [hit for hit in hits if hit.time_us < end * 1_000_000]


def sliding_log(hits: list[Hit], limit: int, window: int) -> dict[str, tuple[int, int]]:
    """``{address: (admitted, denied)}`` under an exact sliding log."""
    logs: dict[str, deque[int]] = {}
    counts: dict[str, list[int]] = {}
    for hit in hits:
        log = logs.setdefault(hit.address, deque())
        while log and log[0] <= hit.time_us - window * 1_000_000:
            log.popleft()
        tally = counts.setdefault(hit.address, [0, 0])
        if len(log) < limit:
            log.append(hit.time_us)
            tally[0] += 1
        else:
            tally[1] += 1
    return {address: (a, d) for address, (a, d) in counts.items()}


def fixed_window(hits: list[Hit], limit: int, window: int) -> dict[str, tuple[int, int]]:
    """``{address: (admitted, denied)}`` under a fixed window aligned on the epoch."""
    windows: dict[str, tuple[int, int]] = {}
    counts: dict[str, list[int]] = {}
    for hit in hits:
        number = hit.time_us // (window * 1_000_000)
        held, used = windows.get(hit.address, (number, 0))
        if held != number:
            used = 0
        tally = counts.setdefault(hit.address, [0, 0])
        if used < limit:
            used += 1
            tally[0] += 1
        else:
            tally[1] += 1
        windows[hit.address] = (number, used)
    return {address: (a, d) for address, (a, d) in counts.items()}


def _clf_time(time_us: int) -> str:
    seconds, micros = divmod(time_us, 1_000_000)
    when = datetime.fromtimestamp(seconds, tz=UTC)
    return when.strftime("%d/%b/%Y:%H:%M:%S") + f".{micros:06d} +0000"


def _iso(time_us: int) -> str:
    seconds, micros = divmod(time_us, 1_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros).isoformat()


def combined(hits: list[Hit]) -> str:
    return "".join(
        f'{h.address} - - [{_clf_time(h.time_us)}] "{h.method} {h.path}?q=1 HTTP/1.1" '
        f'{h.status} 512 "-" "test/1.0"\n'
        for h in hits
    )


def common(hits: list[Hit]) -> str:
    return "".join(
        f'{h.address} - - [{_clf_time(h.time_us)}] "{h.method} {h.path} HTTP/1.1" {h.status} 512\n'
        for h in hits
    )


def json_lines(hits: list[Hit], *, epoch: bool = False) -> str:
    rows = []
    for h in hits:
        seconds, micros = divmod(h.time_us, 1_000_000)
        when: object = f"{seconds}.{micros:06d}" if epoch else _iso(h.time_us)
        field = "msec" if epoch else "time_iso8601"
        rows.append(
            json.dumps(
                {
                    field: when,
                    "remote_addr": h.address,
                    "request_method": h.method,
                    "request_uri": h.path + "?page=2",
                    "status": h.status,
                }
            )
        )
    return "\n".join(rows) + "\n"


def csv_text(hits: list[Hit]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["time", "remote_addr", "request", "status"])
    for h in hits:
        writer.writerow([_iso(h.time_us), h.address, f"{h.method} {h.path} HTTP/1.1", h.status])
    return out.getvalue()
