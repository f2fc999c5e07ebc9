"""Sentinel fails over under load: a primary, a replica and 3 sentinels (quorum 2), the
demo served by gunicorn (2 sync workers) and uvicorn (1 worker, deciding on its event
loop), and 10 client threads, each a string of per-IP clients that send 8 GETs of the
async view ``/hello/`` apiece, every 0.1 s, alternately to the sync and the async server.
Three policies count each request: ``per-ip`` (sliding_log, 4 per 60 s), ``everyone``
(global) and ``per-worker`` (``header:X-Worker``, which the site sets to the answering
process: :mod:`tests.engine.store.worker_middleware`); the last two never fill. Every
request is recorded (client, server, worker, send and receive time, status, and whether
Redis decided it: the ``RateLimit`` field names only the policies Redis decided).

Two failovers, one test each: the primary SIGKILLed, and an operator's ``SENTINEL
FAILOVER`` asked of the last sentinel the site lists (it listens to and asks the first
one first). Sentinel's switch is the first ``+switch-master`` any sentinel announces; the
sliding logs' members carry the Redis time of each admission, so the ``per-worker`` log
on each server tells when each worker last wrote to one and first wrote to the other.

The bound checked: within ``MOVE_BOUND`` (1.5 s; the issue asks for about 1 s, and CI
machines are slow) of the switch, each worker, sync and async, writes on the new primary,
and no write reaches the old primary after that (its keys are read in one transaction
with its role, until it is demoted). Admissions are lost or uncounted only from the
failure (the kill, or the replica's promotion) to that bound: a client none of whose
requests fall in that window is limited exactly (4 admitted of 8), and a client is
admitted past the limit at most as many times as it was admitted in the window.
Afterwards the breaker closes and both paths decide again by themselves: every request
sent after the window is decided by Redis, and each worker answers a 429 from Redis.
No time is asserted but that bound; the figures printed are in ``docs/cluster.md``.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest
import redis

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy
from ratelimits.testutils import RedisSentinel, RedisServer, free_port
from tests.engine.store.worker_middleware import HEADER
from tests.helpers import hashed, sentinel_switch, wait_until
from tests.load import Load
from tests.served import Site, gunicorn_command, serve, site_env, uvicorn_command

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SENTINELS = 3
THREADS = 10
#: Requests each client (one address) sends, one every INTERVAL seconds of its thread.
PER_CLIENT = 8
INTERVAL = 0.1
LIMIT = 4
WINDOW = 60
#: Seconds after Sentinel's switch by which every worker counts on the new primary.
MOVE_BOUND = 1.5
#: Seconds of load before the failover, and after the window and the old primary's demotion.
BEFORE = 1.5
AFTER = 2.0
HTTP_TIMEOUT = 10.0
#: Waits on the servers: to settle, fail over, demote the old primary.
TIMEOUT = 30.0
#: Seconds between two looks at what a wait waits for.
POLL = 0.05
PER_IP, EVERYONE, PER_WORKER = "per-ip", "everyone", "per-worker"


@dataclass(frozen=True)
class Topology:
    primary: RedisServer
    replica: RedisServer
    sentinels: list[RedisSentinel]
    service: str


@dataclass(frozen=True)
class Sample:
    """One request: its client (address) and place in the client's 8, the server
    (``sync`` or ``async``), the worker's pid, times (``time.time()``), status, and whether
    Redis decided ``per-ip`` (not a fail mode)."""

    client: str
    seq: int
    path: str
    worker: str
    sent: float
    received: float
    status: int
    decided: bool


@pytest.fixture
def topology() -> Iterator[Topology]:
    """A primary, its replica and 3 sentinels (quorum 2) on 127.0.0.1, once every sentinel
    sees the pair healthy and the other two."""
    with RedisServer() as primary, ExitStack() as stack:
        replica = stack.enter_context(
            RedisServer(extra=("--replicaof", "127.0.0.1", str(primary.port)))
        )
        service = f"service{primary.port}"
        sentinels = [
            stack.enter_context(RedisSentinel(primary, service, quorum=2)) for _ in range(SENTINELS)
        ]
        wait_until(
            lambda: all(settled(s, primary, replica) for s in sentinels), TIMEOUT, "settled", POLL
        )
        yield Topology(primary, replica, sentinels, service)


def settled(sentinel: RedisSentinel, primary: RedisServer, replica: RedisServer) -> bool:
    client = sentinel.client()
    service = sentinel.service
    if client.sentinel_get_master_addr_by_name(service)[1] != primary.port:
        return False
    if len(client.sentinel_sentinels(service)) != SENTINELS - 1:
        return False
    replicas = client.sentinel_slaves(service)
    return any(
        r["port"] == replica.port and r["flags"] == "slave" and r["master-link-status"] == "ok"
        for r in replicas
    )


@pytest.fixture
def policies(transactional_db: None) -> dict[str, CompiledPolicy]:
    def make(name: str, limit: int, key: str) -> CompiledPolicy:
        row = Policy.objects.create(
            name=name, endpoint="hello", methods="GET", algorithm="sliding_log",
            limit=limit, window=WINDOW, key=key, fail_open=True,
        )  # fmt: skip
        return CompiledPolicy.from_model(row)

    return {
        PER_IP: make(PER_IP, LIMIT, "ip"),
        EVERYONE: make(EVERYONE, 1_000_000, "global"),
        PER_WORKER: make(PER_WORKER, 1_000_000, f"header:{HEADER}"),
    }


@pytest.fixture
def sites(
    django_db_setup: None,
    policies: dict[str, CompiledPolicy],
    topology: Topology,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Site]]:
    """The demo under gunicorn (2 sync workers) and uvicorn (1 worker) on the service,
    each worker its policies loaded from the database on its first request."""
    env = site_env(
        DJANGO_SETTINGS_MODULE="tests.engine.store.sentinel_site_settings",
        RATELIMITS_SENTINEL_SERVICE=topology.service,
        RATELIMITS_SENTINELS=",".join(f"127.0.0.1:{s.port}" for s in topology.sentinels),
        RATELIMITS_NUM_PROXIES="1",
    )
    where = tmp_path_factory.mktemp("sentinel-load")
    sync_port, async_port = free_port(), free_port()
    sync_command = gunicorn_command(sync_port, 2, "--worker-class", "sync")
    with (
        serve(sync_command, sync_port, where / "gunicorn.log", env, "gunicorn") as sync_site,
        serve(
            uvicorn_command(async_port, 1), async_port, where / "uvicorn.log", env, "uvicorn"
        ) as async_site,
    ):
        yield {"sync": sync_site, "async": async_site}


def get(site: Site, client: str) -> tuple[int, str, bool]:
    """One GET of ``/hello/`` from ``client``: status, the worker's pid, whether Redis
    decided ``per-ip``."""
    conn = http.client.HTTPConnection("127.0.0.1", site.port, timeout=HTTP_TIMEOUT)
    try:
        conn.request("GET", "/hello/", headers={"X-Forwarded-For": client})
        response = conn.getresponse()
        response.read()
        field_ = response.getheader("RateLimit") or ""
        decided = any(part.split(";")[0].strip() == f'"{PER_IP}"' for part in field_.split(","))
        return response.status, response.getheader(HEADER) or "", decided
    finally:
        conn.close()


class FailoverLoad(Load[Sample]):
    """THREADS threads, each sending its clients' GETs one every INTERVAL seconds, client
    after client, until stopped (a client always sends its PER_CLIENT)."""

    def __init__(self, sites: dict[str, Site]) -> None:
        super().__init__(THREADS, stop_timeout=HTTP_TIMEOUT * PER_CLIENT)
        self.sites = sites

    def run(self, thread: int) -> None:
        # Threads start a client's requests at staggered times, so that at any moment
        # some clients are under their limit (their admissions show each worker's writes).
        due = time.monotonic() + thread * PER_CLIENT * INTERVAL / THREADS
        for n in range(100_000):
            if self.stopping:
                return
            client = f"10.{thread}.{n // 250}.{n % 250 + 1}"
            for seq in range(PER_CLIENT):
                time.sleep(max(0.0, due - time.monotonic()))
                due = max(due + INTERVAL, time.monotonic() - INTERVAL)
                path = ("sync", "async")[(seq + thread) % 2]
                sent = time.time()
                status, worker, decided = get(self.sites[path], client)
                self.record(Sample(client, seq, path, worker, sent, time.time(), status, decided))


class Announcements:
    """Every event each sentinel publishes (``PSUBSCRIBE *``), with the time it was heard."""

    def __init__(self, sentinels: list[RedisSentinel]) -> None:
        self.events: list[tuple[float, int, str, str]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        for n, sentinel in enumerate(sentinels):
            pubsub = sentinel.client().pubsub(ignore_subscribe_messages=True)
            pubsub.psubscribe("*")
            self._threads.append(threading.Thread(target=self._run, args=(n, pubsub), daemon=True))

    def __enter__(self) -> Announcements:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _run(self, n: int, pubsub: redis.client.PubSub) -> None:
        try:
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=0.1)
                if message is not None:
                    event = (time.time(), n, _text(message["channel"]), _text(message["data"]))
                    with self._lock:
                        self.events.append(event)
        finally:
            pubsub.close()

    def first(self, channel: str) -> float | None:
        with self._lock:
            times = [at for at, _, name, _ in self.events if name == channel]
        return min(times, default=None)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class OldPrimary:
    """Reads the old primary's admissions since ``since`` (every 50 ms, in one transaction
    with its role) until it is demoted: what it held last while still a primary."""

    server: RedisServer
    since: float
    held: dict[str, list[str]] = field(default_factory=dict)
    read_at: float = 0.0
    demoted_at: float | None = None

    SCRIPT = """
    local out = {}
    for _, key in ipairs(redis.call('KEYS', 'rl:*')) do
      if redis.call('TYPE', key).ok == 'zset' then
        out[#out + 1] = key
        local found, named = redis.call('ZRANGEBYSCORE', key, ARGV[1], '+inf', 'WITHSCORES'), {}
        for i = 1, #found, 2 do
          named[#named + 1] = string.format('%.0f', tonumber(found[i + 1])) .. '-' .. found[i]
        end
        out[#out + 1] = named
      end
    end
    return out
    """

    def watch(self, until: float) -> None:
        client = self.server.client()
        while time.monotonic() < until:
            pipe = client.pipeline(transaction=True)
            pipe.execute_command("ROLE")
            pipe.eval(self.SCRIPT, 0, int(self.since * 1e6))
            role, flat = pipe.execute()
            if _text(role[0]) != "master":
                self.demoted_at = time.time()
                return
            self.read_at = time.time()
            self.held = {
                _text(k): [_text(m) for m in v] for k, v in zip(flat[::2], flat[1::2], strict=True)
            }
            time.sleep(0.05)


def admitted_at(members: list[str]) -> list[float]:
    """The Redis times (seconds) of a sliding log's entries, as :func:`members` names
    them: ``<admission µs>-<member>``."""
    return [int(member.split("-")[0]) / 1e6 for member in members]


def members(server: RedisServer, key: str, since: float) -> list[str]:
    """A sliding log's entries since ``since``, each named by its admission time (its
    score, in µs) and its member: a member alone (``<start>:<cost>``) names no time."""
    found = server.client().zrangebyscore(key, int(since * 1e6), "+inf", withscores=True)
    return [f"{int(score)}-{_text(m)}" for m, score in found]


@dataclass
class Run:
    """What one failover under load recorded."""

    samples: list[Sample]
    failed_at: float  # the kill, or the replica's promotion
    switched_at: float  # the first +switch-master
    workers: dict[str, set[str]]  # path -> pids

    @property
    def window_end(self) -> float:
        return self.switched_at + MOVE_BOUND


@pytest.mark.parametrize("kind", ["kill", "operator"])
def test_a_failover_under_load_moves_every_worker_within_the_bound(
    kind: str, topology: Topology, sites: dict[str, Site], policies: dict[str, CompiledPolicy]
) -> None:
    replica = topology.replica
    with Announcements(topology.sentinels) as heard, FailoverLoad(sites) as load:
        wait_until(
            lambda: warmed(load.snapshot()), TIMEOUT, "all three workers decided by Redis", POLL
        )
        time.sleep(BEFORE)
        started = min(s.sent for s in load.snapshot())
        failed_at, old = fail_over(kind, topology, heard, started)
        switched_at = heard.first("+switch-master")
        assert switched_at is not None
        after = switched_at + MOVE_BOUND + AFTER
        wait_until(lambda: time.time() > after, TIMEOUT, "past the window", POLL)
        pids = workers(load.snapshot())
        wait_until(
            lambda: answered_429_from_redis(load.snapshot(), after - AFTER) >= pids,
            TIMEOUT,
            "a 429 from Redis on every worker",
            POLL,
        )
    assert not load.errors, f"client errors: {load.errors[:3]!r}"
    run = Run(load.snapshot(), failed_at, switched_at, workers_by_path(load.snapshot()))
    statuses = dict(Counter(s.status for s in run.samples))
    print(f"\n{kind}: {len(run.samples)} requests {statuses}; Sentinel, from the switch:")
    for at, n, channel, data in heard.events:
        if at >= failed_at - 2 and channel in SHOWN:
            print(f"  {at - switched_at:+.2f} s sentinel {n}: {channel} {data}")

    check_statuses(run)
    check_moves(run, replica, policies[PER_WORKER], started)
    if old is not None:
        check_nothing_after_on_the_old_primary(run, old, replica, policies, started)
    check_admissions(run, replica, policies[PER_IP])
    check_recovery(run, kind)


#: The sentinels' events printed.
SHOWN = {
    "+odown",
    "+elected-leader",
    "+failover-state-wait-promotion",
    "+promoted-slave",
    "+switch-master",
    "+convert-to-slave",
}


def fail_over(
    kind: str, topology: Topology, heard: Announcements, started: float
) -> tuple[float, OldPrimary | None]:
    """Kill the primary, or ask the last sentinel for a failover; return once Sentinel
    switched (and, for the operator's, once the old primary was demoted): when it failed
    (the kill, or the replica's promotion), and the old primary's writes."""
    if kind == "kill":
        failed_at = time.time()
        topology.primary.kill()
        wait_until(lambda: heard.first("+switch-master") is not None, TIMEOUT, "switched", POLL)
        return failed_at, None
    old = OldPrimary(topology.primary, since=started)
    watcher = threading.Thread(target=old.watch, args=(time.monotonic() + TIMEOUT,), daemon=True)
    watcher.start()
    sentinel_switch(topology.replica, topology.sentinels[-1], TIMEOUT)
    wait_until(lambda: heard.first("+switch-master") is not None, TIMEOUT, "switched", POLL)
    watcher.join(TIMEOUT)
    assert old.demoted_at is not None, "the old primary was never demoted"
    promoted = heard.first("+failover-state-wait-promotion")
    assert promoted is not None
    return promoted, old


def warmed(samples: list[Sample]) -> bool:
    by_path = workers_by_path([s for s in samples if s.decided and s.status == 200])
    return len(by_path.get("sync", ())) == 2 and len(by_path.get("async", ())) == 1


def workers(samples: list[Sample]) -> set[str]:
    return {s.worker for s in samples if s.worker}


def workers_by_path(samples: list[Sample]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for s in samples:
        if s.worker:
            found[s.path].add(s.worker)
    return dict(found)


def answered_429_from_redis(samples: list[Sample], since: float) -> set[str]:
    return {s.worker for s in samples if s.sent > since and s.status == 429 and s.decided}


def check_statuses(run: Run) -> None:
    """No 5xx, nothing but 200 and 429."""
    statuses = Counter(s.status for s in run.samples)
    assert set(statuses) <= {200, 429}, statuses
    assert len(run.workers.get("sync", ())) == 2 and len(run.workers.get("async", ())) == 1


def check_moves(run: Run, new: RedisServer, per_worker: CompiledPolicy, since: float) -> None:
    """Each worker, sync and async, writes on the new primary within MOVE_BOUND of the switch."""
    for path, pids in sorted(run.workers.items()):
        for pid in sorted(pids):
            key = per_worker.key_for(hashed(pid, HEADER))
            there = [at for at in admitted_at(members(new, key, since)) if at > run.failed_at]
            assert there, f"the {path} worker {pid} never wrote on the new primary"
            moved = min(there) - run.switched_at
            print(f"  {path} worker {pid}: first write on the new primary {moved:+.3f} s")
            assert moved <= MOVE_BOUND, (path, pid, moved)


def check_nothing_after_on_the_old_primary(
    run: Run,
    old: OldPrimary,
    new: RedisServer,
    policies: dict[str, CompiledPolicy],
    since: float,
) -> None:
    """The operator's failover: the old primary took writes until each worker moved, none
    after the bound, though it stayed a primary long after it; the writes it took after
    the promotion are the admissions lost."""
    assert old.demoted_at is not None
    assert old.demoted_at > run.window_end + 1, "demoted too soon for the check to tell"
    assert old.read_at > old.demoted_at - 0.5, "the old primary was not read near its demotion"
    per_worker = policies[PER_WORKER]
    for path, pids in sorted(run.workers.items()):
        for pid in sorted(pids):
            key = per_worker.key_for(hashed(pid, HEADER))
            last = max(admitted_at(old.held.get(key, [])), default=since)
            moved = last - run.switched_at
            print(f"  {path} worker {pid}: last write on the old primary {moved:+.3f} s")
            assert last <= run.window_end, (path, pid, moved)
    on_new = {k: set(members(new, k, since)) for k in old.held}
    lost = {k: [m for m in v if m not in on_new[k]] for k, v in old.held.items()}
    lost_times = sorted(at for k, v in lost.items() if PER_IP in k for at in admitted_at(v))
    if lost_times:
        span = (
            f"{lost_times[0] - run.switched_at:+.3f} to {lost_times[-1] - run.switched_at:+.3f} s"
        )
    else:
        span = "none"
    print(f"  per-ip admissions lost with the old primary: {len(lost_times)} ({span})")
    assert all(run.failed_at - 0.1 <= at <= run.window_end for at in lost_times)


def check_admissions(run: Run, new: RedisServer, per_ip: CompiledPolicy) -> None:
    """A client is limited exactly unless it sent in the window (the failure to the bound),
    and admitted past the limit at most as often as it was admitted in the window; a
    client that began after the window counts its admissions, on both paths, on the new
    primary."""
    by_client: dict[str, list[Sample]] = defaultdict(list)
    for s in run.samples:
        by_client[s.client].append(s)
    start, end = run.failed_at, run.window_end
    over: list[Sample] = []  # each admission past a client's limit
    over_clients = Counter[str]()
    for client, samples in by_client.items():
        samples.sort(key=lambda s: s.seq)
        statuses = [s.status for s in samples]
        in_window = [s for s in samples if s.sent <= end and s.received >= start]
        if not in_window:
            assert statuses == [200] * LIMIT + [429] * (PER_CLIENT - LIMIT), (client, statuses)
            if samples[0].sent > end:
                assert new.client().zcard(per_ip.key_for(f"ip:{client}")) == LIMIT, client
            continue
        past = [s for s in samples if s.status == 200][LIMIT:]
        assert len(past) <= sum(s.status == 200 for s in in_window), (client, samples)
        over += past
        if past:
            over_clients[client] = len(past)
    seconds = end - start
    rate = sum(s.status == 200 for s in run.samples if start <= s.sent <= end) / seconds
    print(
        f"  window {seconds:.2f} s (failure to switch + {MOVE_BOUND} s), {rate:.0f} "
        f"admissions/s in it; over-admitted: {len(over)} requests, {len(over_clients)} of "
        f"{len(by_client)} clients (at most {max(over_clients.values(), default=0)} each, "
        f"limit {LIMIT})",
        end="",
    )
    if over:
        first, last = min(s.sent for s in over), max(s.received for s in over)
        print(f", sent {first - start:+.2f} to {last - start:+.2f} s after the failure", end="")
    print()


def check_recovery(run: Run, kind: str) -> None:
    """Every request sent after the window is decided by Redis (the breakers closed), on
    both paths, and each worker answers a 429 from Redis then; the fail mode answered only
    from the failure to the bound."""
    undecided = [s for s in run.samples if not s.decided]
    late = [s for s in undecided if s.sent > run.window_end]
    assert not late, late[:3]
    early = [s for s in undecided if s.received < run.failed_at]
    assert not early, early[:3]
    assert answered_429_from_redis(run.samples, run.window_end) == workers(run.samples)
    print(f"  fail mode: {len(undecided)} requests", end="")
    if undecided:
        last = max(s.received for s in undecided)
        print(f", the last answered {last - run.switched_at:+.3f} s after the switch", end="")
    print()
    for path, pids in sorted(run.workers.items()):
        for pid in sorted(pids):
            mine = [s for s in run.samples if s.worker == pid and s.sent >= run.failed_at]
            failed = [s.sent for s in mine if not s.decided]
            if not failed:
                print(f"  {path} worker {pid}: never took the fail mode")
                continue
            back = min(s.received for s in mine if s.decided and s.sent > max(failed))
            print(
                f"  {path} worker {pid}: decided by Redis again {back - run.failed_at:.3f} s "
                f"after the {kind} ({back - run.switched_at:+.3f} s after the switch)"
            )
