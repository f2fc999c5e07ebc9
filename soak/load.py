"""The load: a few threads, each sending GETs at a steady pace over keep-alive
connections (``http.client``) to both servers, and writing down every request as a
:class:`~soak.history.Record`.

Each thread is bounded in time (the run's end) and in count (half as many again as its
pace allows), and each request by a socket timeout. A connection idle for
:data:`IDLE_REOPEN` seconds is opened again before use, so a server closing an idle
keep-alive connection never races a request.
"""

from __future__ import annotations

import http.client
import random
import re
import threading
import time
from collections.abc import Mapping

from soak import mix
from soak.history import FALLBACK, REDIS, Record

#: Seconds one request may take before it counts as unanswered.
REQUEST_TIMEOUT = 10.0
IDLE_REOPEN = 2.0
#: A pace more than this many seconds behind starts again from now (no catch-up burst).
MAX_LAG = 1.0
_QUOTA = re.compile(r'"(?P<name>[^"]+)";q=(?P<q>\d+)')


def limit_in(header: str | None, policy: str) -> int | None:
    """``policy``'s ``q`` in a ``RateLimit-Policy`` field, or ``None`` when it is not there."""
    for match in _QUOTA.finditer(header or ""):
        if match["name"] == policy:
            return int(match["q"])
    return None


class Sender:
    """One thread's connections (one per server) and its requests."""

    def __init__(self, number: int, ports: Mapping[str, int]) -> None:
        self.number = number
        self.ports = dict(ports)
        self.connections: dict[str, tuple[http.client.HTTPConnection, float]] = {}

    def connection(self, server: str) -> http.client.HTTPConnection:
        held = self.connections.get(server)
        if held is not None and time.monotonic() - held[1] < IDLE_REOPEN:
            return held[0]
        if held is not None:
            held[0].close()
        conn = http.client.HTTPConnection("127.0.0.1", self.ports[server], timeout=REQUEST_TIMEOUT)
        self.connections[server] = (conn, time.monotonic())
        return conn

    def send(self, server: str, endpoint: mix.Endpoint, client: str) -> Record:
        conn = self.connection(server)
        send = time.time()
        try:
            conn.request("GET", endpoint.path, headers={mix.HEADER: client})
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as e:
            recv = time.time()
            conn.close()
            self.connections.pop(server, None)
            detail = f"{type(e).__name__}: {e}"[:200]
            return Record(
                self.number,
                client,
                endpoint.path,
                endpoint.policy,
                server,
                send,
                recv,
                0,
                "",
                detail=detail,
            )
        recv = time.time()
        self.connections[server] = (conn, time.monotonic())
        limit = limit_in(response.getheader("RateLimit-Policy"), endpoint.policy)
        detail = "" if response.status in (200, 429) else body[:200].decode(errors="replace")
        return Record(
            self.number,
            client,
            endpoint.path,
            endpoint.policy,
            server,
            send,
            recv,
            response.status,
            FALLBACK if limit is None else REDIS,
            limit or 0,
            detail,
        )

    def close(self) -> None:
        for conn, _ in self.connections.values():
            conn.close()


def run_thread(
    number: int, ports: Mapping[str, int], until: float, rate: float, out: list[Record]
) -> None:
    """Send at ``rate`` per second until ``until`` (``time.time()``), into ``out``."""
    rng = random.Random(number)
    sender = Sender(number, ports)
    names, weights = list(mix.CLIENTS), list(mix.CLIENTS.values())
    endpoint_weights = [endpoint.weight for endpoint in mix.ENDPOINTS]
    interval = 1.0 / rate
    most = int((until - time.time()) * rate * 1.5) + 100
    next_at = time.monotonic() + rng.random() * interval
    crowd = 0
    try:
        for _ in range(most):
            if time.time() >= until:
                break
            now = time.monotonic()
            if now < next_at:
                time.sleep(next_at - now)
            elif now > next_at + MAX_LAG:
                next_at = now
            next_at += interval
            endpoint = rng.choices(mix.ENDPOINTS, endpoint_weights)[0]
            if rng.random() < mix.CROWD:
                crowd += 1
                client = f"crowd-{number}-{crowd}"
                if rng.random() < mix.CROWD_MONTH:
                    endpoint = mix.BY_POLICY[mix.MONTH]
            else:
                client = rng.choices(names, weights)[0]
            out.append(sender.send(rng.choice(mix.SERVERS), endpoint, client))
    finally:
        sender.close()


def run(ports: Mapping[str, int], seconds: float) -> list[Record]:
    """The whole load: :data:`mix.THREADS` threads for ``seconds``; every record, by send."""
    until = time.time() + seconds
    outs: list[list[Record]] = [[] for _ in range(mix.THREADS)]
    threads = [
        threading.Thread(
            target=run_thread,
            args=(n, ports, until, mix.RATE / mix.THREADS, outs[n]),
            name=f"soak-load-{n}",
            daemon=True,
        )
        for n in range(mix.THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, until - time.time()) + REQUEST_TIMEOUT + 5)
    if any(thread.is_alive() for thread in threads):
        raise RuntimeError("a load thread did not finish in time")
    return sorted((r for out in outs for r in out), key=lambda r: r.send)
