"""(policies, identities) -> decisions, in one Redis round trip.

:func:`decide` runs the decide code (see ``lua/decide.lua``) once for every policy that
matches a request, in one call (on a Redis Cluster, one per hash slot the request's keys
use): an ``FCALL`` of the function library, or the script by SHA where the server has
no Functions. The call is built as bytes (:mod:`ratelimits.engine.store.commands`) and
sent on the thread's own connection (:mod:`ratelimits.engine.store.caller`), which loads
the code again when a server lost it, so a flush or a restart costs no request an error.
When Redis cannot answer, or the circuit breaker is open, every policy answers with its
fail mode instead. A key that Redis said is over its limit until a known time is denied
in the worker until then, without a round trip (see :mod:`ratelimits.engine.denials`).
Nothing here knows about DRF, the admin or HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

from ratelimits.conf import app_settings
from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.denials import generation as denials_generation
from ratelimits.engine.denials import lookup as remembered_denial
from ratelimits.engine.denials import remember as remember_denial
from ratelimits.engine.near_limit import crossed as crossed_near_limit
from ratelimits.engine.policy import Check
from ratelimits.engine.receipt import Receipt, receipt_of
from ratelimits.engine.reminders import Reminder
from ratelimits.engine.reporting import report
from ratelimits.engine.shadow_log import shadow_log
from ratelimits.engine.store import async_caller, caller, commands, connection, errors, scripts
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store.commands import bulk_strings
from ratelimits.engine.store.connection import Client
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")

REPLY_FIELDS = 6  # allowed, count x 1000, remaining, retry_ms, reset_ms, blocked_us
POLICY_SLOTS = 6  # algorithm, limit, window_ms, enforce, burst, cost (lua/decide.lua)


_script: Script | None = None


def _decide_script(client: Any) -> Script:
    global _script
    if _script is None:
        _script = client.register_script(scripts.decide_source())
    return _script


def decide(checks: Sequence[Check], *, record: bool = True, now: float | None = None) -> Verdict:
    """Decide one request against ``checks``, all or nothing.

    ``record=False`` only looks: nothing is written. ``now`` (seconds since the epoch)
    replaces the Redis clock, for replaying exact timelines in tests; only requests on
    the Redis clock use and feed the worker's remembered denials. A recorded request is
    counted once (stats, the dashboard, Prometheus), with the time it took here; an
    admitted one names in ``verdict.near_limit`` the policies it took near their limits
    (:mod:`ratelimits.engine.near_limit`).
    """
    if not checks:
        return Verdict()
    request = _Request(checks, record, now)
    if request.answer is not None:
        return request.answer
    try:
        client = connection.get_client()
        if len(checks) == 1 or not connection.is_cluster(client):
            reply = _call(checks, client, record, now)
        else:  # keys in several hash slots, perhaps
            plan = _calls(checks, client, record=record)
            reply = _through(plan, lambda sent: _call(sent.checks, client, sent.record, now))
    except Exception as error:
        return request.failed(error)
    return request.decided(reply)


async def adecide(
    checks: Sequence[Check], *, record: bool = True, now: float | None = None
) -> Verdict:
    """:func:`decide` for coroutines: the same call, keys, breaker, fail modes and
    remembered denials, sent on a ``redis.asyncio`` connection of the running loop."""
    if not checks:
        return Verdict()
    request = _Request(checks, record, now)
    if request.answer is not None:
        return request.answer
    try:
        client = connection.get_client()
        if len(checks) == 1 or not connection.is_cluster(client):
            reply = await _acall(checks, client, record, now)
        else:  # keys in several hash slots, perhaps
            plan = _calls(checks, client, record=record)
            try:
                sent = next(plan)
                while True:
                    sent = plan.send(await _acall(sent.checks, client, sent.record, now))
            except StopIteration as done:
                reply = done.value
    except Exception as error:
        return request.failed(error)
    return request.decided(reply)


class _Request:
    """One request's decision around its Redis call, the same on both paths: the
    remembered denial that answers it without a call, the verdict from the reply (and
    the denials it teaches), or the fail verdict for the error the call met."""

    __slots__ = ("answer", "checks", "local", "record", "seen", "sent_at", "started")

    def __init__(self, checks: Sequence[Check], record: bool, now: float | None) -> None:
        self.checks, self.record = checks, record
        self.started = time.perf_counter()
        self.answer: Verdict | None = None
        self.local = record and now is None
        if self.local:
            self.sent_at = time.monotonic()
            denied = remembered_denial(checks, self.sent_at)
            if denied is not None:
                _report(denied, self.started, "local")
                self.answer = denied
            self.seen = denials_generation()

    def decided(self, reply: list[int]) -> Verdict:
        checks = self.checks
        _, verdict = verdict_from(checks, reply)
        if self.local:
            for index, (check, decision) in enumerate(zip(checks, verdict.decisions, strict=True)):
                blocked_us = reply[2 + REPLY_FIELDS * index + 5]
                # Units a response gives back free before the time Redis could tell.
                if blocked_us > 0 and not check.policy.gives_back:
                    remember_denial(
                        check, decision, blocked_us / 1_000_000, self.sent_at, self.seen
                    )
        if self.record:
            for check in checks:  # no call at all on the usual request, which holds nothing
                if check.policy.gives_back:
                    verdict.receipt = receipt_of(checks, reply, REPLY_FIELDS)
                    break
            if verdict.allowed:
                verdict.near_limit = crossed_near_limit(checks, verdict.decisions)
            _report(verdict, self.started, "redis")
        return verdict

    def failed(self, error: Exception) -> Verdict:
        """The fail verdict after ``error``; errors that are not Redis's are raised."""
        if isinstance(error, _ServerFailed):
            cause = error.error
            if errors.is_pool_busy(cause):  # our side, not the server: not counted
                breakers.pool_busy(cause)
            elif _is_outage(cause):  # logged once, by the breaker when it opens
                error.guard.failure(cause)
            else:
                logger.error("ratelimits: the decide script failed for %s: %s", error.key, cause)
        elif isinstance(error, ConfigurationError):
            breakers.breaker.failure(error)
        elif not isinstance(error, (_BreakerOpen, connection.Unreachable)):
            raise error
        return _fail_verdict(self.checks, self.started if self.record else None)


def peek(checks: Sequence[Check], client: Client) -> tuple[int, Verdict]:
    """What ``checks`` would decide now, consuming nothing: ``(now_us, verdict)``.

    For tools (the management command, the admin): no breaker and no fail mode, so a
    Redis error is raised to the caller.
    """
    if not checks:
        return int(client.time()[0]) * 1_000_000, Verdict()
    return evaluate(checks, client, record=False)


def evaluate(
    checks: Sequence[Check], client: Client, *, record: bool, now: float | None = None
) -> tuple[int, Verdict]:
    """Decide ``checks`` (one script call per hash slot): ``(now_us, verdict)``; errors are
    raised."""
    return verdict_from(checks, _run_all(checks, client, record=record, now=now))


def queue_peek(checks: Sequence[Check], pipeline: redis.client.Pipeline) -> None:
    """Queue a read-only decide call on ``pipeline`` (of one server: on a cluster, a node's
    client from :func:`connection.node_client`); read its reply with :func:`verdict_from`.
    An ``FCALL_RO`` of the peek function where the server lets it run (see
    :func:`caller.peeks_by_function`), else the script."""
    if not caller.peeks_by_function(pipeline):
        _run(checks, pipeline, record=False, now=None)
        return
    keys = [check.key for check in checks]
    args = _arguments(checks, False, None)
    pipeline.execute_command("FCALL_RO", scripts.peek_function_name(), len(keys), *keys, *args)


def queue_decide(
    checks: Sequence[Check], pipeline: redis.client.Pipeline, *, now: float | None = None
) -> None:
    """Queue a recording decide call on ``pipeline`` (one server, all ``checks`` in one
    slot), at ``now`` (seconds) or the Redis clock. Redis runs queued calls in order, so
    replaying a timeline through one pipeline decides exactly as calling :func:`evaluate`
    for each request would; read each reply with :func:`verdict_from`."""
    _run(checks, pipeline, record=True, now=now)


class _BreakerOpen(Exception):
    """A server the request needs is skipped by its open circuit breaker."""


class _Counted(Exception):
    """A give-back failed on a server whose breaker is open now (or on a busy pool):
    logged by the breaker already, not once more per give-back."""


class _ServerFailed(Exception):
    def __init__(self, guard: breakers.CircuitBreaker, key: str, error: Exception) -> None:
        super().__init__(str(error))
        self.guard, self.key, self.error = guard, key, error


@dataclass(slots=True)
class _Send:
    """One call a plan asks for: ``checks`` (all in one hash slot), recording or not."""

    checks: Sequence[Check]
    record: bool


#: A plan of calls: yields each call to make, is sent its reply, returns the merged reply.
_Plan = Generator[_Send, list[int], list[int]]


def _calls(checks: Sequence[Check], client: Client, *, record: bool) -> _Plan:
    """The calls that decide ``checks`` on a cluster, and their replies merged in the
    checks' order.

    One call can only touch one hash slot, so checks are grouped by slot: one group
    (every policy counts the same identity, the usual case) is still one call; several
    are first checked in every slot without recording, and recorded slot by slot only
    when all admit. Each call re-checks atomically, so a request that races into a slot
    between the two phases can be denied after it was recorded in another slot: it then
    counts there. That errs towards denying, never towards admitting more than a limit.
    """
    groups = _slot_groups(client, checks)
    if len(groups) == 1:
        return (yield _Send(checks, record))
    parts = [[checks[i] for i in group] for group in groups]
    replies = []
    for part in parts:
        replies.append((yield _Send(part, False)))
    if record and all(reply[0] for reply in replies):
        replies = []
        for part in parts:
            replies.append((yield _Send(part, True)))
    merged: list[int] = [int(all(reply[0] for reply in replies)), int(replies[0][1])]
    fields: list[list[int]] = [[] for _ in checks]
    times: list[int] = [0] * len(checks)
    for group, reply in zip(groups, replies, strict=True):
        for position, index in enumerate(group):
            start = 2 + REPLY_FIELDS * position
            fields[index] = list(reply[start : start + REPLY_FIELDS])
            times[index] = int(reply[1])
    for found in fields:
        merged.extend(found)
    merged.extend(times)  # each policy's own call time, for its receipt
    return merged


def _run_all(
    checks: Sequence[Check], client: Client, *, record: bool, now: float | None
) -> list[int]:
    """The decide reply for ``checks``, in their order, without a breaker (tools)."""
    if len(checks) == 1 or not connection.is_cluster(client):
        return _run(checks, client, record=record, now=now)
    plan = _calls(checks, client, record=record)
    return _through(plan, lambda sent: _run(sent.checks, client, record=sent.record, now=now))


def _through(plan: _Plan, call: Callable[[_Send], list[int]]) -> list[int]:
    """Make each call ``plan`` asks for with ``call``, and return its merged reply."""
    try:
        sent = next(plan)
        while True:
            sent = plan.send(call(sent))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _slot_groups(client: Client, checks: Sequence[Check]) -> list[list[int]]:
    """Indexes of ``checks`` grouped by hash slot, on a cluster."""
    by_slot: dict[int, list[int]] = {}
    for index, check in enumerate(checks):
        by_slot.setdefault(connection.slot_of(client, check.key), []).append(index)
    return list(by_slot.values())


def _is_outage(error: Exception) -> bool:
    """True when ``error`` says the server cannot decide (unreachable, slow, full, busy,
    loading, a replica after a failover, a cluster without the slot: see
    :func:`errors.is_outage`), which its breaker counts; False when the script failed on
    these keys (say, a foreign value), or no connection of ours was free."""
    return errors.is_outage(error)


def _guard(
    checks: Sequence[Check], client: Client, *, record: bool = True
) -> breakers.CircuitBreaker:
    """The circuit breaker of the server the call for ``checks`` goes to; raises
    :class:`_BreakerOpen` when it skips that server (a look that records nothing never
    takes an open breaker's try: its success would not show that Redis takes writes)."""
    if connection.is_cluster(client):
        guard = connection.breaker_for(client, checks[0].key)
    else:  # one server, one breaker: no key to compute
        guard = breakers.breaker
    if not (guard.allow() if record else guard.allow_read()):
        raise _BreakerOpen
    return guard


def _call(checks: Sequence[Check], client: Client, record: bool, now: float | None) -> list[int]:
    """One call for ``checks`` (all in one hash slot), through its server's breaker."""
    guard = _guard(checks, client, record=record)
    try:
        reply = _run(checks, client, record=record, now=now)
    except connection.REDIS_ERRORS as e:
        raise _ServerFailed(guard, checks[0].key, e) from e
    if record:
        guard.success()
    else:  # a look: Redis answered a call that wrote nothing
        guard.read_success()
    return reply


async def _acall(
    checks: Sequence[Check], client: Client, record: bool, now: float | None
) -> list[int]:
    """:func:`_call` from a coroutine."""
    guard = _guard(checks, client, record=record)
    try:
        reply = await _arun(checks, client, record=record, now=now)
    except connection.REDIS_ERRORS as e:
        raise _ServerFailed(guard, checks[0].key, e) from e
    if record:
        guard.success()
    else:  # a look: Redis answered a call that wrote nothing
        guard.read_success()
    return reply


#: The arguments in front of the policies' own: now (``""``: the Redis clock) and record.
_HEAD_ARGUMENTS = {record: bulk_strings(["", "1" if record else "0"]) for record in (True, False)}


def _run(checks: Sequence[Check], client: Any, *, record: bool, now: float | None) -> list[int]:
    """The decide call for ``checks`` (all in one hash slot) on ``client``: a server's
    client, a cluster's, or a pipeline that queues it."""
    if type(client) is redis.Redis or (
        isinstance(client, redis.Redis) and not isinstance(client, redis.client.Pipeline)
    ):
        call = decide_call(checks, record=record, now=now)
        return caller.for_pool(client.connection_pool).call(call)  # type: ignore[no-any-return]
    keys = [check.key for check in checks]
    if connection.is_cluster(client):
        call = decide_call(checks, record=record, now=now, keys=keys)
        return _send(client, keys, call, lambda: _arguments(checks, record, now))
    # A pipeline (tools): redis-py's script object loads the script when it runs.
    script = _decide_script(client)
    return script(keys=keys, args=_arguments(checks, record, now), client=client)  # type: ignore[no-any-return]


async def _arun(
    checks: Sequence[Check], client: Client, *, record: bool, now: float | None
) -> list[int]:
    """:func:`_run` from a coroutine, for a server's client or a cluster's."""
    if not connection.is_cluster(client):
        call = decide_call(checks, record=record, now=now)
        return await async_caller.for_pool(client.connection_pool).call(call)  # type: ignore[no-any-return]
    keys = [check.key for check in checks]
    node = connection.node_client(client, keys[0])
    call = decide_call(checks, record=record, now=now, keys=keys)
    try:
        return await async_caller.for_pool(node.connection_pool).call(call)  # type: ignore[no-any-return]
    except (redis.exceptions.AskError, redis.exceptions.TryAgainError) as moving:
        # A moving slot is rare: followed as on the sync path, off the loop.
        args = _arguments(checks, record, now)
        return await asyncio.to_thread(_follow, client, moving, keys, args)  # type: ignore[no-any-return]


def _send(
    client: Client,
    keys: list[str],
    call: commands.DecideCall,
    arguments: Callable[[], list[str]],
) -> list[int]:
    """``call`` for ``keys`` (one hash slot) on the server that holds them; on a cluster
    whose slot is moving, through :func:`_run_redirected` with ``arguments()``."""
    if not connection.is_cluster(client):
        return caller.for_pool(client.connection_pool).call(call)  # type: ignore[no-any-return]
    node = connection.node_client(client, keys[0])
    try:
        return caller.for_pool(node.connection_pool).call(call)  # type: ignore[no-any-return]
    except (redis.exceptions.AskError, redis.exceptions.TryAgainError) as moving:
        return _follow(client, moving, keys, arguments())  # type: ignore[no-any-return]


def _follow(client: Client, moving: Exception, keys: list[str], args: list[str]) -> Any:
    """The call for ``keys`` while their slot moves (``moving``: the ``ASK`` or ``TRYAGAIN``
    the owner answered), running the source so that no node needs anything loaded.

    ``ASK`` and ``MOVED`` (redis-py's ``MovedError`` is an ``AskError``) are followed
    here: ``ASKING``, then the call, on the node named; after ``MOVED`` the client's slot
    map learns the new owner, so the next requests go there at once. redis-py's cluster
    client fails on an ``ASK`` to a primary that owns no slot yet, as a new one while it
    fills (its node cache has no such node: redis-py #4015). ``TRYAGAIN`` goes through
    redis-py's client, which waits and retries. Whatever that client raises that is not a
    Redis error is turned into one, so that the request gets its policies' fail mode,
    never a 500."""
    source = scripts.decide_source()
    if isinstance(moving, redis.exceptions.MovedError):
        connection.learn_moved(client, moving)
    if isinstance(moving, redis.exceptions.AskError):
        pipe = connection.asked_client(client, moving.host, moving.port).pipeline(transaction=False)
        pipe.execute_command("ASKING")
        pipe.execute_command("EVAL", source, len(keys), *keys, *args)
        return pipe.execute()[1]
    try:
        return client.execute_command("EVAL", source, len(keys), *keys, *args)
    except connection.REDIS_ERRORS:
        raise
    except Exception as e:  # the cluster client's own failure while following a redirection
        raise redis.exceptions.ClusterError(
            f"the cluster client failed to follow a moving slot: {e!r}"
        ) from e


#: The decide function's second argument that gives back (``lua/give_back.lua``).
_GIVE_BACK = "2"


def give_back(receipt: Receipt, status: int | None) -> None:
    """Give back what ``receipt``'s request holds that its response does not keep:
    concurrency slots always, and the units of a policy that does not count a response
    of ``status`` (``None``: no response came; see :meth:`Receipt.due`).

    One call (on a cluster, one per hash slot). Never raises: a Redis that cannot answer
    is logged (an open circuit breaker skips the call quietly), and the units stay spent
    until they leave their window (a concurrency slot until its lease ends).
    """
    due = receipt.due(status)
    if not due:
        return
    try:
        client = connection.get_client()
        checks = [receipt.checks[i] for i in due]
        if len(checks) == 1 or not connection.is_cluster(client):
            groups = [due]
        else:
            groups = [[due[i] for i in group] for group in _slot_groups(client, checks)]
        for group in groups:
            _give_back_group(receipt, group, client)
    except (_BreakerOpen, connection.Unreachable):  # known down: the breaker said so
        logger.debug("ratelimits: the breaker is open; nothing given back")
    except _Counted as counted:  # the breaker is open: it logged its opening once
        logger.debug("ratelimits: nothing given back: %s", counted)
    except Exception as error:  # the response is sent: nothing may reach the client
        logger.warning(
            "ratelimits: could not give back %s: %s; the units stay spent until they "
            "leave their window (a concurrency slot until its lease ends).",
            ", ".join(check.policy.name for check in receipt.checks),
            error,
            exc_info=not isinstance(error, connection.REDIS_ERRORS),
        )


def _give_back_group(receipt: Receipt, group: list[int], client: Client) -> None:
    """One give-back call for the receipt's checks at ``group`` (one hash slot)."""
    checks = [receipt.checks[i] for i in group]
    args = [str(receipt.times[group[0]]), _GIVE_BACK]
    for index, check in zip(group, checks, strict=True):
        at = receipt.times[index] / 1_000_000
        algorithm, limit, window_ms, _, burst, _ = check.policy.args_at(at)[check.shard]
        args += [algorithm, limit, window_ms, str(receipt.marks[index]), burst, str(check.units)]
    keys = [check.key for check in checks]
    call = commands.decide_call(keys, bulk_strings(args), len(args))
    guard = _guard(checks, client)
    try:
        _send(client, keys, call, lambda: args)
    except connection.REDIS_ERRORS as error:
        if errors.is_pool_busy(error):
            breakers.pool_busy(error)
            raise _Counted(error) from error
        if _is_outage(error):
            guard.failure(error)
            if guard.is_open:  # one line when it opened, none per give-back after
                raise _Counted(error) from error
        raise
    guard.success()


def decide_call(
    checks: Sequence[Check],
    *,
    record: bool = True,
    now: float | None = None,
    keys: list[str] | None = None,
) -> commands.DecideCall:
    """The one call that decides ``checks`` (``keys``: their keys, when known already),
    as :mod:`ratelimits.engine.store.commands` sends it."""
    if keys is None:
        keys = [check.key for check in checks]
    count = 2 + POLICY_SLOTS * len(checks)
    if now is not None:  # a replayed time: calendar periods are the time's, not the clock's
        arguments = bulk_strings(_arguments(checks, record, now))
        return commands.decide_call(keys, arguments, count, read_only=not record)
    policies = [check.wire_args for check in checks]
    arguments = _HEAD_ARGUMENTS[record] + b"".join(policies)
    return commands.decide_call(keys, arguments, count, read_only=not record)


def _arguments(checks: Sequence[Check], record: bool, now: float | None) -> list[str]:
    args = ["" if now is None else str(round(now * 1_000_000)), "1" if record else "0"]
    for check in checks:
        args.extend(check.policy.args_at(now)[check.shard][:-1])
        args.append(str(check.units))
    return args


def verdict_from(checks: Sequence[Check], reply: list[int]) -> tuple[int, Verdict]:
    """``(now_us, verdict)`` from the decide script's reply for ``checks``."""
    return int(reply[1]), Verdict(tuple([_decision(c, reply, i) for i, c in enumerate(checks)]))


def _decision(check: Check, reply: list[int], index: int) -> Decision:
    start = 2 + REPLY_FIELDS * index
    allowed, count_milli, remaining, retry_ms, reset_ms = reply[start : start + 5]
    policy = check.policy
    if not allowed and check.units > 1 and check.units > policy.capacities[check.shard]:
        _warn_oversized(check)
    return Decision(
        policy=policy.name,
        identity=check.identity,
        allowed=bool(allowed),
        enforce=policy.enforce,
        limit=policy.limit,
        window=policy.window,
        count=count_milli / 1000,
        remaining=int(remaining),
        retry_after=retry_ms / 1000,
        reset=reset_ms / 1000,
    )


#: Policies warned about a cost they can never grant (again each minute, per name).
_oversized = Reminder()


def _warn_oversized(check: Check) -> None:
    name = check.policy.name
    if not _oversized.due(name):
        return
    logger.warning(
        "ratelimits: policy %s can never grant a cost of %d (at most %d per shard): such "
        "requests are denied for a window. Repeated every minute while they come.",
        name,
        check.units,
        check.policy.capacities[check.shard],
    )


def _fail_verdict(checks: Sequence[Check], started: float | None) -> Verdict:
    """Each policy's fail mode; ``started`` (``perf_counter``) is the request's start, or
    ``None`` for a look that records nothing, which is not counted."""
    retry_after = float(app_settings.FAIL_CLOSED_RETRY_AFTER)
    verdict = Verdict(
        tuple(
            Decision(
                policy=c.policy.name,
                identity=c.identity,
                allowed=c.policy.fail_open,
                enforce=c.policy.enforce,
                limit=c.policy.limit,
                window=c.policy.window,
                count=0.0,
                remaining=0,
                retry_after=0.0 if c.policy.fail_open else retry_after,
                reset=0.0,
                failed=True,
            )
            for c in checks
        )
    )
    if started is not None:
        report(verdict, time.perf_counter() - started, "fallback")
    return verdict


def _report(verdict: Verdict, started: float, source: str) -> None:
    """Count a recorded request that took from ``started`` (``perf_counter``) until now,
    answered from ``source`` (see :data:`ratelimits.engine.reporting.SOURCES`)."""
    report(verdict, time.perf_counter() - started, source)
    for decision in verdict.decisions:
        if decision.shadow_denied:  # logged once per client and window
            shadow_log.would_deny(decision)
