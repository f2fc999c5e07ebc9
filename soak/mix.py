"""The shape of the soak's load: which endpoints, under which policy and face, how often,
from which clients, at what rate; and the policies themselves (``policies.json``).

Every endpoint is under exactly one policy of the file, so a response's
``RateLimit-Policy`` tells whether Redis decided it. Clients name themselves in the
``X-Soak-Client`` header, which every per-client policy counts by. A few heavy clients
send about twice their limits, the light ones about two thirds of them, and one request
in five comes from a client never seen before (the crowd), which costs Redis a key each;
three quarters of the crowd's requests go to the month quota, whose keys stay for the
whole run, so that what the keys take stands out of what Redis takes for itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLICY_FILE = Path(__file__).resolve().parent / "policies.json"
HEADER = "X-Soak-Client"

#: The policy of the demo's report view, which takes ReportView.BUILD_SECONDS to build:
#: the run reads it into that policy's row as ``hold``.
REPORT = "soak-report"

#: Threads of the load, and the requests per second they aim at together.
THREADS = 6
RATE = 100.0
#: Share of requests from a client never seen before, and the share of those that go to
#: the month quota (the others go where the weights say).
CROWD = 0.2
CROWD_MONTH = 0.75
MONTH = "soak-month"
#: Regular clients and their weights: 4 heavy (3), 8 light (1).
CLIENTS: dict[str, int] = {f"c{n:02d}": 3 if n < 4 else 1 for n in range(12)}
#: The servers of the site, each asked half of the time.
SERVERS = ("gunicorn", "uvicorn")

#: The policies whose limit the run lowers, and then restores.
EDITED = ("soak-log", "soak-bucket", "soak-fixed")


@dataclass(frozen=True)
class Endpoint:
    """A path of the site, the policy that limits it, the face that applies it."""

    path: str
    policy: str
    face: str
    weight: float


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("/api/items/", "soak-log", "DRF throttle (URL name)", 0.16),
    Endpoint("/hello/", "soak-compact", "middleware, async view", 0.16),
    Endpoint("/api/search/?q=item", "soak-counter", "DRF throttle (throttle_scope)", 0.16),
    Endpoint("/ninja/items", "soak-fixed", "django-ninja throttle", 0.16),
    Endpoint("/soak/quota/", "soak-month", "decorator", 0.16),
    Endpoint("/soak/plain/", "soak-bucket", "middleware, plain sync view", 0.16),
    Endpoint("/api/report/", "soak-report", "DRF throttle, 0.3 s view", 0.04),
)
BY_POLICY = {endpoint.policy: endpoint for endpoint in ENDPOINTS}


def policy_rows() -> list[dict[str, Any]]:
    """The rows of ``policies.json``."""
    rows: list[dict[str, Any]] = json.loads(POLICY_FILE.read_text(encoding="utf-8"))["policies"]
    return rows


def lowered_file(path: Path) -> Path:
    """``policies.json`` with the limits of :data:`EDITED` halved, written to ``path``."""
    rows = policy_rows()
    for row in rows:
        if row["name"] in EDITED:
            row["limit"] = lowered(row["limit"])
    path.write_text(json.dumps({"version": 1, "policies": rows}, indent=1), encoding="utf-8")
    return path


def lowered(limit: int) -> int:
    return max(1, limit // 2)
