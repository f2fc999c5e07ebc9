"""What a soak run writes down, and reads back for the checker: one :class:`Record` per
request, one :class:`Fault` per injected fault, one :class:`MemorySample` per look at
Redis's memory, and the run's :class:`Meta`; each list in a JSON-lines file.

Times are ``time.time()`` seconds, the clock Redis's ``TIME`` reads on this machine, so
a request's ``[send, recv]`` brackets the moment its script ran.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

#: How Redis took part in a response: it decided it (the policy in ``RateLimit-Policy``),
#: or the policy took its fail mode (the header leaves out decisions without numbers).
REDIS, FALLBACK = "redis", "fallback"


@dataclass(frozen=True, slots=True)
class Record:
    """One request of the load and its answer (``status`` 0: no answer, see ``detail``)."""

    thread: int
    client: str
    path: str
    policy: str
    server: str
    send: float
    recv: float
    status: int
    #: :data:`REDIS` or :data:`FALLBACK` ("" with no answer).
    decided: str
    #: The policy's limit as the response's ``RateLimit-Policy`` gave it (``q``), or 0.
    limit: int = 0
    #: An error or the start of an unexpected body.
    detail: str = ""

    @property
    def admitted(self) -> bool:
        return self.status == 200

    @property
    def by_redis(self) -> bool:
        return self.decided == REDIS


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault as it happened: what, on which server, from ``start`` to ``end``.

    ``wipe``: the server came back empty, so counting started again (windows are checked
    on each side apart). ``lost``: ``[from, to]`` during which admissions may have been
    written where a failover throws them away (:mod:`soak.faults` says how it is set).
    ``limits``: a limit edit's new limits, by policy.
    """

    kind: str
    target: str
    start: float
    end: float
    note: str = ""
    wipe: bool = False
    lost: tuple[float, float] | None = None
    limits: dict[str, int] = field(default_factory=dict)
    #: Set when the fault could not be run, or was skipped for lack of time.
    error: str = ""
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class MemorySample:
    """Redis's memory at ``at``, summed over the primaries.

    ``above_baseline``: data bytes (``used_memory`` less buffers and code) above the
    baseline taken before the site started; while the site runs this includes what its
    connections cost. ``by_policy``: ``[keys, bytes]`` of each policy's keys
    (``MEMORY USAGE``); ``bookkeeping``: bytes of the app's other keys. ``final``: taken
    after the site stopped, with no connection of its own left.
    """

    at: float
    above_baseline: int
    by_policy: dict[str, list[int]]
    bookkeeping: int
    connections: int
    final: bool = False
    #: For the final sample: each primary's data bytes.
    nodes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LeaseLook:
    """The concurrency keys after the load stopped: live leases (their start times) and
    keys still stored, at ``at``."""

    at: float
    live: tuple[float, ...]
    keys: int


@dataclass(frozen=True, slots=True)
class Meta:
    """The run of one topology: its timing, the load's shape and the policies' rows."""

    topology: str
    started: float
    stopped: float
    seconds: float
    threads: int
    target_rate: float
    policies: dict[str, dict[str, Any]]
    redis_version: str
    servers: dict[str, str] = field(default_factory=dict)
    #: A primary's data bytes: ``fresh`` before any client, ``baseline`` once the site
    #: had served and stopped, and the difference, ``first_use``.
    memory: dict[str, int] = field(default_factory=dict)
    error: str = ""


T = TypeVar("T")


def write_lines(path: Path, items: Iterable[Any]) -> None:
    """``items`` (dataclasses) as JSON lines in ``path``."""
    with path.open("w", encoding="utf-8") as out:
        for item in items:
            out.write(json.dumps(dataclasses.asdict(item), separators=(",", ":")) + "\n")


def read_lines(path: Path, kind: type[T]) -> Iterator[T]:
    """The ``kind`` instances of a file :func:`write_lines` wrote (none if it is missing)."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            values = json.loads(line)
            if "lost" in values and values["lost"] is not None:
                values["lost"] = tuple(values["lost"])
            if "live" in values:
                values["live"] = tuple(values["live"])
            yield kind(**values)


def write_meta(path: Path, meta: Meta) -> None:
    path.write_text(json.dumps(dataclasses.asdict(meta), indent=1) + "\n", encoding="utf-8")


def read_meta(path: Path) -> Meta:
    return Meta(**json.loads(path.read_text(encoding="utf-8")))


#: The files of one topology's run, in its own directory.
RECORDS, FAULTS, MEMORY, LEASES, META = (
    "history.jsonl",
    "faults.jsonl",
    "memory.jsonl",
    "leases.jsonl",
    "meta.json",
)
