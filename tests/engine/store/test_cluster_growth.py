"""A Redis Cluster grows while it serves: gunicorn (2 sync workers) answers 16 client
threads while the test adds a primary and moves half the slots to it, keys and all.

The load runs in rounds. In each, every client (64, four per thread, each named by an
``X-Client`` header) sends one GET, and beside it the test takes one step of the growth:
adding the primary, then for each quarter of the moving slots, the steps of
``redis-cli --cluster reshard`` one by one (:class:`SlotMigration`), with a round more
while the keys sit on the new primary and their slots still migrate (every request for
them is sent there with ``ASK``). The next round begins when both are done, so every
step meets requests and every client's requests reach its slot before, during and after
its move. A per-client policy admits ``LIMIT`` of a client's ``ROUNDS`` requests, a
global one (never reached) counts every admitted request in one hot key; that key's
slot moves, and so does the policy table's version stamp's.

The cluster is the module's own, so that a failure halfway through a move cannot leave
the suite's cluster half moved for the tests after it.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from redis.cluster import RedisCluster

from ratelimits.engine import limiter
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import scripts
from ratelimits.models import Policy
from ratelimits.testutils import (
    RedisClusterServers,
    RedisServer,
    SlotMigration,
    free_port,
    reset_state,
)
from tests.helpers import hashed, libraries, server_major
from tests.load import Load
from tests.served import Site, announce_new_version, gunicorn_command, serve, site_env
from tests.site_settings import RATELIMITS as SITE_RATELIMITS

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 2
THREADS = 16
CLIENTS = 64
#: The moving slots go in this many parts, each taking STEPS_PER_PART rounds.
PARTS = 4
STEPS_PER_PART = 4
#: A client's limit, its admitted rounds: one before the growth, one adding the primary,
#: the move, two after it.
LIMIT = 1 + 1 + PARTS * STEPS_PER_PART + 2
#: Rounds after each client's limit is reached: all denied.
ROUNDS = LIMIT + 3
HEADER = "X-Client"
#: Seconds a request may take at most: the site's wait for Redis.
SOCKET_TIMEOUT = float(SITE_RATELIMITS["SOCKET_TIMEOUT"])
#: Bounds on waiting: for one HTTP reply, for the other side of a round.
HTTP_TIMEOUT = 10.0
ROUND_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServers]:
    with RedisClusterServers(primaries=3) as servers:
        yield servers


@pytest.fixture(scope="module")
def site(
    django_db_setup: None,
    tmp_path_factory: pytest.TempPathFactory,
    cluster: RedisClusterServers,
) -> Iterator[Site]:
    """``gunicorn`` serving the demo (with ``tests/faces/served_site.py``) limiting on the
    module's cluster."""
    port = free_port()
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    env = site_env(
        DJANGO_SETTINGS_MODULE="tests.engine.store.cluster_site_settings",
        RATELIMITS_CLUSTER_NODES=",".join(cluster.startup_nodes),
    )
    command = gunicorn_command(port, WORKERS, "--worker-class", "sync")
    with serve(command, port, log, env, "gunicorn") as served:
        yield served


@pytest.fixture
def tools_on_cluster(settings, cluster: RedisClusterServers) -> RedisCluster:
    """This process's limiter and tools on the module's cluster; its client."""
    settings.RATELIMITS = {**settings.RATELIMITS, "CLUSTER_NODES": cluster.startup_nodes}
    reset_state()
    return cluster.client()


@dataclass(frozen=True)
class Sample:
    """One request of the load: its client and round, status, seconds, and the policies
    Redis decided (the ``RateLimit`` field leaves out those that took their fail mode)."""

    client: int
    round: int
    status: int
    seconds: float
    decided: frozenset[str]


def test_a_primary_added_and_half_the_slots_moved_under_load(
    site: Site, cluster: RedisClusterServers, tools_on_cluster: RedisCluster
) -> None:
    client = tools_on_cluster
    per_client = policy("per-client", LIMIT, f"header:{HEADER}")
    everyone = policy("everyone", 1_000_000, "global")
    announce_new_version(client)
    wait_for_policies(site, ["per-client", "everyone"])
    everyone_before = count(everyone, "global", client)

    names = [f"client-{n}" for n in range(CLIENTS)]
    keys = [per_client.key_for(hashed(name, HEADER)) for name in names]
    moving = half_of_each(cluster)
    size = len(moving) // PARTS  # consecutive slots, as reshard takes them from a source
    parts = [moving[i * size : (i + 1) * size] for i in range(PARTS)]
    assert client.keyslot(everyone.key_for("global")) in moving

    grown: dict[str, object] = {}

    def add_primary() -> None:
        grown["listed before"] = listed_keys()
        grown["new"] = cluster.add_primary()

    steps: list[Callable[[], None]] = [lambda: None, add_primary]
    migrations: list[SlotMigration] = []
    for part in parts:

        def begin(part: list[int] = part) -> None:
            new = grown["new"]
            assert isinstance(new, RedisServer)
            migrations.append(SlotMigration(cluster, part, new))
            migrations[-1].start()

        steps += [
            begin,
            lambda: migrations[-1].migrate_keys(),
            lambda: None,  # the keys on the new primary, their slots still migrating
            lambda: migrations[-1].finish(),
        ]
    steps += [lambda: None] * (ROUNDS - len(steps))
    assert len(steps) == ROUNDS

    rounds = run_rounds(site, names, steps)
    samples = rounds.samples
    new = grown["new"]
    assert isinstance(new, RedisServer)

    # No 5xx, nothing slower than the site's wait for Redis, and Redis decided every
    # request: none took a fail mode.
    statuses = Counter(s.status for s in samples)
    slowest = max(s.seconds for s in samples)
    assert len(samples) == CLIENTS * ROUNDS
    assert set(statuses) <= {200, 429}, statuses
    assert slowest < SOCKET_TIMEOUT, f"a request took {slowest:.3f} s"
    undecided = [s for s in samples if "per-client" not in s.decided]
    assert not undecided, (
        f"{len(undecided)} requests took the fail mode: {undecided[:3]}\n{site.output()}"
    )
    assert all("everyone" in s.decided for s in samples if s.status == 200)

    # Exact admission for every client, its slot moved or not: its first LIMIT requests
    # admitted, the rest denied, and the count that moved with its key is LIMIT. (The
    # bound docs/cluster.md states for a client whose slot moves, one request more or
    # less per request of its that took the fail mode, is 0 here: none did.)
    owners = cluster.owners()
    moved = [n for n, key in enumerate(keys) if owners[client.keyslot(key)] is new]
    assert 0 < len(moved) < CLIENTS
    for n, name in enumerate(names):
        seen = [s.status for s in sorted(samples, key=lambda s: s.round) if s.client == n]
        assert seen == [200] * LIMIT + [429] * (ROUNDS - LIMIT), (name, n in moved, seen)
        assert count(per_client, hashed(name, HEADER), client) == LIMIT, name
    # The hot key, whose slot moved, counted every admitted request once.
    assert count(everyone, "global", client) - everyone_before == CLIENTS * LIMIT
    assert owners[client.keyslot(everyone.key_for("global"))] is new

    # The slots moved for real: the new primary owns half of them and holds the keys;
    # requests met the move (ASK from the old owners while keys were on the new one, MOVED
    # after), and every primary runs the decide code (loaded on the new one by a request).
    assert sorted(s for s, owner in owners.items() if owner is new) == moving
    assert all(new.client().exists(keys[n]) for n in moved)
    redirects = errorstats(cluster, "ASK"), errorstats(cluster, "MOVED")
    assert redirects[0] > 0 and redirects[1] > 0, redirects
    assert_decide_code_everywhere(cluster)

    # The tools of this long-lived process followed the new layout: they list the keys
    # on the new primary too, and reset a client whose key moved there.
    before, after = grown["listed before"], listed_keys()
    assert isinstance(before, set) and set(keys) <= before
    assert not before - after, f"{len(before - after)} keys not listed after the move"
    assert after == before
    victim = names[moved[0]]
    out = io.StringIO()
    call_command(
        "ratelimits", "reset", "--policy", "per-client", "--identity",
        f"header:{HEADER}={victim}", "--yes", stdout=out,
    )  # fmt: skip
    assert new.client().exists(keys[moved[0]]) == 0, out.getvalue()
    assert "Deleted 1 key" in out.getvalue()

    moves = range(2, 2 + PARTS * STEPS_PER_PART)
    print(
        f"\n{len(samples)} requests in {rounds.seconds(0, ROUNDS - 1):.1f} s: "
        f"{dict(statuses)}; slowest {slowest * 1000:.0f} ms; {len(moved)} of {CLIENTS} "
        f"clients moved, each admitted {LIMIT} of {ROUNDS} (limit {LIMIT}); primary added "
        f"in {rounds.step_seconds[1]:.2f} s; {len(moving)} slots moved in "
        f"{rounds.seconds(moves[0], moves[-1]):.2f} s of {len(moves)} rounds (the moving "
        f"commands {sum(rounds.step_seconds[i] for i in moves):.2f} s); "
        f"ASK {redirects[0]}, MOVED {redirects[1]}",
        end="",
    )


def policy(name: str, limit: int, key: str) -> CompiledPolicy:
    row = Policy.objects.create(
        name=name, endpoint="api:items", methods="GET", algorithm="sliding_log",
        limit=limit, window=3600, key=key, fail_open=True,
    )  # fmt: skip
    return CompiledPolicy.from_model(row)


def wait_for_policies(site: Site, names: list[str]) -> None:
    """Wait (10 s at most) until every worker has answered a GET decided under every one
    of ``names``; a worker that held its table without them serves it once more while it
    builds the new one. Sends 8 GETs at once, each from a new client, so that both
    workers answer."""
    ready: set[str] = set()
    deadline = time.monotonic() + 10.0
    with ThreadPoolExecutor(max_workers=8) as pool:
        while len(ready) < WORKERS:
            assert time.monotonic() < deadline, f"workers {ready} held {names}:\n{site.output()}"
            clients = [f"warm-up-{time.monotonic_ns()}-{i}" for i in range(8)]
            for reply in pool.map(lambda name: get(site.port, name), clients):
                if reply.status == 200 and set(names) <= reply.decided:
                    ready.add(reply.worker)
            time.sleep(0.1)


@dataclass(frozen=True)
class Reply:
    """A response: its status, seconds, the policies its ``RateLimit`` field names, and
    the worker that answered it."""

    status: int
    seconds: float
    decided: frozenset[str]
    worker: str


def get(port: int, name: str, conn: http.client.HTTPConnection | None = None) -> Reply:
    """One GET of ``/api/items/`` as client ``name`` (on ``conn``, else a connection of
    its own)."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
    try:
        started = time.perf_counter()
        conn.request("GET", "/api/items/", headers={HEADER: name})
        response = conn.getresponse()
        response.read()
        seconds = time.perf_counter() - started
        field = response.getheader("RateLimit") or ""
        decided = frozenset(part.split(";")[0].strip().strip('"') for part in field.split(","))
        return Reply(response.status, seconds, decided, response.getheader("X-Served-By", ""))
    finally:
        if own:
            conn.close()


@dataclass(frozen=True)
class Rounds:
    """What :func:`run_rounds` saw: every request, and when each round began and ended
    (``time.monotonic()``) with the seconds its step took."""

    samples: list[Sample]
    began: list[float]
    ended: list[float]
    step_seconds: list[float]

    def seconds(self, first: int, last: int) -> float:
        """From the start of round ``first`` to the end of round ``last``."""
        return self.ended[last] - self.began[first]


class RoundsLoad(Load[Sample]):
    """THREADS threads, each sending one GET for each of its clients (4, in turn) a round,
    then waiting at :attr:`barrier` for the round's step and the other threads."""

    def __init__(self, site: Site, names: list[str], rounds: int) -> None:
        super().__init__(THREADS, stop_timeout=ROUND_TIMEOUT)
        self.site, self.names, self.rounds = site, names, rounds
        #: Where each round ends: every thread and the test, its step done.
        self.barrier = threading.Barrier(THREADS + 1)

    def run(self, thread: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.site.port, timeout=HTTP_TIMEOUT)
        try:
            for round_ in range(self.rounds):
                for n in names_of(thread, len(self.names)):
                    reply = get(self.site.port, self.names[n], conn)
                    self.record(Sample(n, round_, reply.status, reply.seconds, reply.decided))
                self.barrier.wait(timeout=ROUND_TIMEOUT)
        except BaseException:
            self.barrier.abort()
            raise
        finally:
            conn.close()


def run_rounds(site: Site, names: list[str], steps: list[Callable[[], None]]) -> Rounds:
    """Each of ``steps`` beside one round of requests (every client one GET, 4 clients a
    thread in turn), the next round once both are done."""
    load = RoundsLoad(site, names, len(steps)).start()
    began: list[float] = []
    ended: list[float] = []
    step_seconds: list[float] = []
    try:
        for step in steps:
            began.append(time.monotonic())
            step()
            step_seconds.append(time.monotonic() - began[-1])
            load.barrier.wait(timeout=ROUND_TIMEOUT)
            ended.append(time.monotonic())
    except BaseException:
        load.barrier.abort()
        raise
    finally:
        load.join(ROUND_TIMEOUT)
    assert not load.errors, f"client errors: {load.errors[:3]!r}\n{site.output()}"
    return Rounds(load.snapshot(), began, ended, step_seconds)


def names_of(thread: int, clients: int) -> list[int]:
    """The clients a thread sends for: every THREADS-th from its own number."""
    return list(range(thread, clients, THREADS))


def half_of_each(cluster: RedisClusterServers) -> list[int]:
    """Half the slots, 8192: the upper half of each primary's."""
    by_owner: dict[RedisServer, list[int]] = {}
    for slot, owner in sorted(cluster.owners().items()):
        by_owner.setdefault(owner, []).append(slot)
    take = {owner: len(slots) // 2 for owner, slots in by_owner.items()}
    for owner, slots in by_owner.items():
        if sum(take.values()) < 8192 and len(slots) % 2:
            take[owner] += 1
    return sorted(slot for owner, slots in by_owner.items() for slot in slots[-take[owner] :])


def count(p: CompiledPolicy, identity: str, client: RedisCluster) -> float:
    _, verdict = limiter.peek([limiter.Check(p, identity)], client)
    return verdict.decisions[0].count


def listed_keys() -> set[str]:
    """The keys ``ratelimits keys`` lists (``--json``), in this process."""
    out = io.StringIO()
    call_command("ratelimits", "keys", "--json", stdout=out)
    return {row["key"] for row in json.loads(out.getvalue())}


def errorstats(cluster: RedisClusterServers, error: str) -> int:
    """How many ``error`` replies (ASK, MOVED) the nodes gave (``INFO errorstats``)."""
    total = 0
    for node in cluster.running():
        stats = node.client().info("errorstats")
        found = stats.get(f"errorstat_{error}", {})
        if isinstance(found, str):  # redis-py before 5.1 leaves "count=3" unparsed
            found = dict(part.split("=", 1) for part in found.split(","))
        total += int(found.get("count", 0))
    return total


def assert_decide_code_everywhere(cluster: RedisClusterServers) -> None:
    """Every primary holds the decide code: the library on Redis 7+, else the script."""
    sha = hashlib.sha1(scripts.decide_source().encode(), usedforsecurity=False).hexdigest()
    for node in cluster.running():
        server = node.client()
        if server_major(server) >= 7:
            assert libraries(server) == [scripts.library_name()], node.port
        else:
            assert server.script_exists(sha) == [True], node.port
