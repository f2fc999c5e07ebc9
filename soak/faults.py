"""The fault schedule: what goes wrong during a soak, when, and how each fault is done.

Each topology has its list of faults at fractions of the run (:data:`SCHEDULES`); a
thread runs them in order, each at its time or :data:`GAP` seconds after the previous
one ended, whichever is later, and skips those that would start after :data:`LAST` of
the run, so that every fault is followed by load. Each fault returns the
:class:`~soak.history.Fault` the checker reads:

- ``flush``: ``FUNCTION FLUSH`` (Redis 7) and ``SCRIPT FLUSH`` on every primary.
- ``pause``: ``SIGSTOP`` on a primary, ``SIGCONT`` :data:`PAUSE` seconds later.
- ``kill``: ``SIGKILL`` on a server, started again (empty) :data:`DOWN` seconds later: a
  *wipe*, so windows are checked on each side of it apart.
- ``failover-kill`` (Sentinel): the primary killed; the sentinels promote the replica;
  the old primary is started again (empty) and becomes the new one's replica. Writes not
  yet replicated when it died are lost: ``lost`` is the half second before the kill.
- ``failover`` (Sentinel): an operator's ``SENTINEL FAILOVER``. The old primary takes
  writes until it is demoted, which its demotion throws away; the limiter moves when the
  sentinels announce the new primary (docs/cluster.md measured 0.11 to 0.17 s). ``lost``
  runs from the command to :data:`SWITCH_MARGIN` seconds after the sentinels named the
  new primary.
- ``reshard`` (Cluster): a primary added, and a quarter of each primary's slots moved to
  it with their keys, :data:`RESHARD_PART` at a time, by the steps ``redis-cli --cluster
  reshard`` takes (:class:`~ratelimits.testutils.SlotMigration`).
- ``lower``: the limits of :data:`mix.EDITED` halved by ``manage.py ratelimits import``;
  ``restore``: set back through the ORM, as the admin saves a row.
- ``worker``: ``SIGKILL`` on one gunicorn worker (its master starts another).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from ratelimits.testutils import RedisServer, SlotMigration
from soak import mix
from soak.history import Fault
from soak.site import Site, manage
from soak.topology import SERVICE, Cluster, Sentinel, Single, Topology

PAUSE = 2.0
DOWN = 2.0
GAP = 2.5
LAST = 0.9
SWITCH_MARGIN = 1.0
#: Seconds a fault waits at most for the servers to settle.
SETTLE_TIMEOUT = 30.0
#: Seconds an accepted ``SENTINEL FAILOVER`` gets to name the new primary.
ATTEMPT_TIMEOUT = 10.0
#: A reshard moves its slots this many at a time (a node pauses about 50 µs a slot when
#: told a slot's new owner, docs/cluster.md), with this many seconds between its steps.
RESHARD_PART = 512
RESHARD_STEP = 0.15

SCHEDULES: dict[str, tuple[tuple[float, str], ...]] = {
    "single": (
        (0.10, "flush"),
        (0.20, "pause"),
        (0.30, "lower"),
        (0.40, "kill"),
        (0.52, "restore"),
        (0.62, "worker"),
        (0.72, "flush"),
        (0.80, "pause"),
    ),
    "sentinel": (
        (0.08, "flush"),
        (0.16, "pause"),
        (0.26, "failover-kill"),
        (0.44, "lower"),
        (0.52, "failover"),
        (0.64, "restore"),
        (0.72, "worker"),
        (0.80, "flush"),
    ),
    "cluster": (
        (0.06, "flush"),
        (0.12, "pause"),
        (0.22, "kill"),
        (0.36, "reshard"),
        (0.55, "lower"),
        (0.64, "worker"),
        (0.72, "restore"),
        (0.80, "flush"),
    ),
}


@dataclass
class Chaos:
    """What the faults act on: the servers, the site, the run's directory, and the
    policies' limits as the file has them."""

    topology: Topology
    site: Site
    env: dict[str, str]
    directory: Path
    originals: dict[str, int] = field(default_factory=dict)


def flush_code(node: RedisServer) -> None:
    """``FUNCTION FLUSH`` (Redis 7) and ``SCRIPT FLUSH`` on ``node``."""
    client = node.client()
    if int(client.info("server")["redis_version"].split(".")[0]) >= 7:
        client.execute_command("FUNCTION", "FLUSH")
    client.script_flush()


def flush(chaos: Chaos) -> Fault:
    start = time.time()
    nodes = chaos.topology.primaries()
    for node in nodes:
        flush_code(node)
    target = ",".join(str(node.port) for node in nodes)
    return Fault("flush", target, start, time.time(), "FUNCTION FLUSH, SCRIPT FLUSH")


def pause(chaos: Chaos) -> Fault:
    node = chaos.topology.primaries()[0]
    assert node.process is not None
    start = time.time()
    os.kill(node.process.pid, signal.SIGSTOP)
    try:
        time.sleep(PAUSE)
    finally:
        os.kill(node.process.pid, signal.SIGCONT)
    return Fault("pause", str(node.port), start, time.time(), f"SIGSTOP, SIGCONT {PAUSE:g} s later")


def kill(chaos: Chaos) -> Fault:
    topology = chaos.topology
    node = topology.server if isinstance(topology, Single) else topology.primaries()[1]
    start = time.time()
    node.kill()
    time.sleep(DOWN)
    node.start()
    if isinstance(topology, Cluster):
        topology.cluster.wait_ok(SETTLE_TIMEOUT)
    note = f"SIGKILL, started again empty {DOWN:g} s later"
    return Fault("kill", str(node.port), start, time.time(), note, wipe=True)


def failover_kill(chaos: Chaos) -> Fault:
    topology = chaos.topology
    assert isinstance(topology, Sentinel)
    old, new = topology.primary(), topology.replica()
    start = time.time()
    old.kill()
    _wait_named(topology, new, SETTLE_TIMEOUT)
    end = time.time()
    # Back as the new primary's replica, as the configuration Sentinel rewrites would say.
    old.extra = ("--replicaof", "127.0.0.1", str(new.port))
    old.start()
    _wait_replica(old)
    note = (
        f"primary :{old.port} killed; the sentinels named :{new.port} after "
        f"{end - start:.2f} s; :{old.port} back as its replica after {time.time() - start:.1f} s"
    )
    return Fault("failover-kill", str(old.port), start, end, note, lost=(start - 0.5, start))


def failover(chaos: Chaos) -> Fault:
    """``SENTINEL FAILOVER``, sent again while the sentinel refuses it (``NOGOODSLAVE``,
    ``INPROG``) or a failover it accepted came to nothing (it may abort one when its view
    of the replica is not fresh yet)."""
    topology = chaos.topology
    assert isinstance(topology, Sentinel)
    old, new = topology.primary(), topology.replica()
    start = time.time()
    deadline = time.monotonic() + 2 * SETTLE_TIMEOUT
    tries = 0
    while True:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{tries} SENTINEL FAILOVER never made :{new.port} the primary")
        tries += 1
        try:
            topology.sentinels[0].client().sentinel_failover(SERVICE)
        except redis.ResponseError:
            time.sleep(0.5)
            continue
        if _wait_named(topology, new, ATTEMPT_TIMEOUT, fail=False):
            break
    end = time.time()
    note = (
        f"SENTINEL FAILOVER ({tries} sent): :{new.port} named after {end - start:.2f} s "
        f"(was :{old.port})"
    )
    return Fault("failover", str(old.port), start, end, note, lost=(start, end + SWITCH_MARGIN))


def _wait_replica(server: RedisServer) -> None:
    """Until ``server`` replicates a primary with its link up (the sentinels turn a
    primary that comes back into the new one's replica)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        info = server.client().info("replication")
        if info["role"] == "slave" and info.get("master_link_status") == "up":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f":{server.port} never became a replica again")
        time.sleep(0.1)


def _wait_named(topology: Sentinel, server: RedisServer, timeout: float, fail: bool = True) -> bool:
    """Whether the sentinels named ``server`` the primary within ``timeout`` seconds
    (``fail``: raise if not)."""
    deadline = time.monotonic() + timeout
    while topology.named_port() != server.port:
        if time.monotonic() > deadline:
            if fail:
                raise RuntimeError(f"the sentinels never named :{server.port} the primary")
            return False
        time.sleep(0.02)
    return True


def reshard(chaos: Chaos) -> Fault:
    topology = chaos.topology
    assert isinstance(topology, Cluster)
    cluster = topology.cluster
    start = time.time()
    new = cluster.add_primary()
    by_owner: dict[int, list[int]] = {}
    for slot, owner in cluster.owners().items():
        by_owner.setdefault(owner.port, []).append(slot)
    slots = [slot for owned in by_owner.values() for slot in sorted(owned)[: len(owned) // 4]]
    for first in range(0, len(slots), RESHARD_PART):
        migration = SlotMigration(cluster, slots[first : first + RESHARD_PART], new)
        migration.start()
        time.sleep(RESHARD_STEP)
        migration.migrate_keys()
        time.sleep(RESHARD_STEP)
        migration.finish()
    keys = new.client().dbsize()
    note = (
        f"primary :{new.port} added; {len(slots)} slots moved to it, {RESHARD_PART} at a "
        f"time, {keys} keys there after"
    )
    return Fault("reshard", str(new.port), start, time.time(), note)


def lower(chaos: Chaos) -> Fault:
    path = mix.lowered_file(chaos.directory / "policies-lowered.json")
    limits = {name: mix.lowered(chaos.originals[name]) for name in mix.EDITED}
    start = time.time()
    manage(chaos.env, "ratelimits", "import", str(path))
    note = "manage.py ratelimits import: " + ", ".join(f"{k} {v}" for k, v in limits.items())
    return Fault("lower", "policies", start, time.time(), note, limits=limits)


def restore(chaos: Chaos) -> Fault:
    from django.db import connection

    from ratelimits.models import Policy

    start = time.time()
    for name in mix.EDITED:
        policy = Policy.objects.get(name=name)
        policy.limit = chaos.originals[name]
        policy.save()
    connection.close()
    limits = {name: chaos.originals[name] for name in mix.EDITED}
    note = "Policy.save() per row: " + ", ".join(f"{k} {v}" for k, v in limits.items())
    return Fault("restore", "policies", start, time.time(), note, limits=limits)


def worker(chaos: Chaos) -> Fault:
    workers = chaos.site.workers("gunicorn")
    if not workers:
        raise RuntimeError("no gunicorn worker to kill")
    start = time.time()
    os.kill(workers[0], signal.SIGKILL)
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        now = chaos.site.workers("gunicorn")
        if len(now) == len(workers) and workers[0] not in now:
            break
        time.sleep(0.05)
    note = f"SIGKILL on gunicorn worker {workers[0]}; replaced after {time.time() - start:.2f} s"
    return Fault("worker", str(workers[0]), start, start, note)


FAULTS: dict[str, Callable[[Chaos], Fault]] = {
    "flush": flush,
    "pause": pause,
    "kill": kill,
    "failover-kill": failover_kill,
    "failover": failover,
    "reshard": reshard,
    "lower": lower,
    "restore": restore,
    "worker": worker,
}


class Schedule(threading.Thread):
    """Runs a topology's schedule over ``seconds`` from ``started``; :attr:`faults` holds
    what happened. :meth:`stop` skips the faults not begun yet."""

    def __init__(self, chaos: Chaos, started: float, seconds: float) -> None:
        super().__init__(name="soak-faults", daemon=True)
        self.chaos, self.started, self.seconds = chaos, started, seconds
        self.faults: list[Fault] = []
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        last_end = self.started
        for fraction, kind in SCHEDULES[self.chaos.topology.name]:
            at = max(self.started + fraction * self.seconds, last_end + GAP)
            if at > self.started + LAST * self.seconds or self._halt.is_set():
                self.faults.append(Fault(kind, "", at, at, "no time left", skipped=True))
                continue
            if self._halt.wait(max(0.0, at - time.time())):
                self.faults.append(Fault(kind, "", at, at, "the run stopped", skipped=True))
                continue
            try:
                fault = FAULTS[kind](self.chaos)
            except Exception as e:
                now = time.time()
                error = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
                fault = Fault(kind, "", at, now, error=error[:2000])
            self.faults.append(fault)
            last_end = fault.end
