"""Sign-in protection: what ``RateLimitBackend`` adds to one ``authenticate()``.

Each contender runs ``authenticate(request, username=..., password=...)`` in process
for one of 1,000 usernames, then closes the request as Django's handler does after the
response (which gives back the unit of an attempt that did not fail):

- ``ModelBackend`` alone, a wrong password: the baseline (the password check, with
  Django's MD5 hasher so that the backend's own cost is not hidden behind PBKDF2's);
- ``RateLimitBackend`` first, one sign-in policy per username (``sliding_log``), a
  wrong password: one Redis call, the unit kept;
- the same, two sign-in policies (per username and per address): still one call;
- the same, a right password: the call, and the give-back after the response;
- the anchors in the same run: the ``limits`` library's moving window ``hit()`` and a
  ``PING`` on the same server.

Redis calls are counted with ``INFO commandstats``. The contenders take turns within
each run, so load from elsewhere falls on all alike.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.common import (
    DECIDE_COMMANDS,
    Context,
    Section,
    command_delta,
    command_stats,
    contenders_table,
)

USERS = 1000
LIMIT = 1_000_000
WINDOW = 3600
PASSWORD = "bench-password"
BASELINE = "ModelBackend alone, a wrong password"
LIMITS_HIT = "limits moving window hit()"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
SIGN_IN_BACKEND = "ratelimits.backends.RateLimitBackend"


@dataclass(frozen=True)
class Contender:
    label: str
    backends: tuple[str, ...]
    policies: tuple[str, ...]
    step: Callable[[int], object]


def _attempt(password: str) -> Callable[[int], object]:
    from django.contrib.auth import authenticate
    from django.test import RequestFactory

    factory = RequestFactory()

    def step(i: int) -> None:
        request = factory.post("/accounts/login/", REMOTE_ADDR=f"10.201.{i // 250 % 4}.{i % 250}")
        authenticate(request, username=f"bench-user-{i % USERS}", password=password)
        request.close()  # as the handler does after the response

    return step


def contenders(ctx: Context) -> list[Contender]:
    from limits import RateLimitItemPerHour
    from limits.storage import RedisStorage
    from limits.strategies import MovingWindowRateLimiter

    moving = MovingWindowRateLimiter(RedisStorage(ctx.redis.url))
    item = RateLimitItemPerHour(LIMIT)
    ping = ctx.client()
    both = (MODEL_BACKEND,)
    guarded = (SIGN_IN_BACKEND, MODEL_BACKEND)
    wrong, right = _attempt("wrong-password"), _attempt(PASSWORD)
    return [
        Contender(BASELINE, both, (), wrong),
        Contender("RateLimitBackend, 1 policy, a wrong password", guarded, ("username",), wrong),
        Contender(
            "RateLimitBackend, 2 policies, a wrong password", guarded, ("username", "ip"), wrong
        ),
        Contender("RateLimitBackend, 1 policy, a right password", guarded, ("username",), right),
        Contender(LIMITS_HIT, both, (), lambda i: moving.hit(item, "bench", str(i % USERS))),
        Contender("PING", both, (), lambda i: ping.ping()),
    ]


def install(keys: tuple[str, ...]) -> None:
    from ratelimits.engine.table import current as table
    from ratelimits.models import Policy

    Policy.objects.filter(name__startswith="bench-sign-in-").delete()
    for key in keys:
        Policy.objects.create(
            name=f"bench-sign-in-{key}",
            endpoint="*",
            algorithm="sliding_log",
            limit=LIMIT,
            window=WINDOW,
            key=key,
            counts="sign_in_failures",
        )
    table.reset()
    table.get_table()


def run(ctx: Context) -> Section:
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        hashed = make_password(PASSWORD)
        User.objects.bulk_create(
            User(username=f"bench-user-{i}", password=hashed) for i in range(USERS)
        )
        try:
            return _measure(ctx)
        finally:
            User.objects.filter(username__startswith="bench-user-").delete()


def _measure(ctx: Context) -> Section:
    from django.test.utils import override_settings

    lineup = contenders(ctx)
    attempts = ctx.scaled(3000, 30)
    times: dict[str, list[float]] = {c.label: [] for c in lineup}
    calls: dict[str, float] = {}
    with ctx.client() as client:
        for run_index in range(ctx.runs + 1):  # the first run warms up and is not kept
            for contender in lineup:
                with override_settings(AUTHENTICATION_BACKENDS=list(contender.backends)):
                    install(contender.policies)
                    gc.collect()
                    before = command_stats(client)
                    started = time.perf_counter()
                    for i in range(attempts):
                        contender.step(i)
                    elapsed = time.perf_counter() - started
                    delta = command_delta(before, command_stats(client))
                if run_index:
                    times[contender.label].append(elapsed / attempts * 1e6)
                calls[contender.label] = sum(delta.get(n, 0) for n in DECIDE_COMMANDS) / attempts
    install(())
    title = "Sign-in protection: RateLimitBackend per authenticate()"
    return Section(title, describe(times, calls))


def describe(times: dict[str, list[float]], calls: dict[str, float]) -> str:
    table = contenders_table(
        "per authenticate()",
        times,
        calls,
        baseline=BASELINE,
        anchor=LIMITS_HIT,
        uncounted=(LIMITS_HIT, "PING"),
    )
    return (
        f"{table}\n\n"
        f"{USERS:,} usernames, each signing in from its own address, sign-in policies of "
        f"{LIMIT:,} per {WINDOW} s (never reached), Django's MD5 password hasher (with the "
        "default PBKDF2 hasher one password check alone takes tens of milliseconds, and "
        "the backend's cost disappears in it); each figure is the median of the runs, "
        "each run the mean over its attempts. `decide calls` are the decide function's "
        "calls Redis counted per attempt: a right password's second one is the give-back "
        "after its response."
    )
