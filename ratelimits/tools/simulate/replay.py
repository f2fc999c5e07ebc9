"""The replay: every line decided by the real decide code, at the line's own time, on a
scratch server.

Each line makes one decide call per scenario whose policies it meets, with the line's time
as the call's ``now``: the same keys, arguments and Lua a live request's call has (built
by :mod:`ratelimits.engine.decide_protocol`, sent as :mod:`ratelimits.engine.store.commands` packs
it), under a key prefix of the replay's own. Calls go in batches on one connection; Redis
runs them in order, so a batch decides as one call per line would.

A policy that counts only failures or successes spends nothing on a line whose status it
does not count: that line's call only looks (a live request's units come back when its
response ends, which in a log is the same moment). A call whose policies disagree about
the status looks first, then records for those that count, when all admitted.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from ratelimits.engine import decide_protocol as protocol
from ratelimits.engine.decide_protocol import LOOK, POLICY_SLOTS, RECORD, decide_call
from ratelimits.engine.keys.exemptions import networks as exempt_networks
from ratelimits.engine.keys.names import build_key
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.store import commands, scripts
from ratelimits.engine.store.commands import bulk_strings
from ratelimits.tools.simulate.formats import LogLine
from ratelimits.tools.simulate.identities import UNSHOWN, identity_of, is_exempt
from ratelimits.tools.simulate.routing import matching
from ratelimits.tools.simulate.selection import EXACT, Scenario, Selection, Variant
from ratelimits.tools.simulate.sources import Entry
from ratelimits.tools.simulate.tally import ClientTally, PolicyTally

#: Calls sent before their replies are read.
BATCH = 2000
#: Distinct (method, path) pairs each scenario remembers the matching policies of.
MATCH_CACHE = 50_000
#: Lines between two progress reports.
PROGRESS_EVERY = 25_000
#: Keys whose memory is read to give a variant's memory per client.
MEMORY_SAMPLE = 200

#: What is waiting for a call's reply: ``(tally, client)`` per check, in the call's order.
_Targets = list[tuple[PolicyTally, ClientTally]]


@dataclass
class Outcome:
    """What a replay read and decided."""

    tallies: dict[str, PolicyTally]
    #: Lines read and parsed, replayed or not.
    lines: int = 0
    #: Lines from ``EXEMPT_NETWORKS``: no policy counts them.
    exempt: int = 0
    #: Lines no policy matched.
    unmatched: int = 0
    #: Lines with a user field: ``user`` policies have someone to count.
    with_user: int = 0
    start_us: int | None = None
    end_us: int | None = None
    #: Seconds the replay took.
    elapsed: float = 0.0
    #: Lines whose cost field was not a whole number of at least 1 (the policy's cost).
    bad_costs: int = 0
    calls: int = 0
    notes: list[str] = field(default_factory=list)


class Replay:
    """Replays lines through ``selection``'s scenarios on ``client``'s server, under keys
    starting with ``prefix``."""

    def __init__(
        self,
        client: redis.Redis,
        selection: Selection,
        *,
        prefix: str,
        cost_field: str | None = None,
        progress: Callable[[int, float], None] | None = None,
        batch: int = BATCH,
    ) -> None:
        self.client = client
        self.selection = selection
        self.prefix = prefix
        self.cost_field = cost_field
        self.progress = progress
        self.batch = batch
        self.tallies: dict[str, PolicyTally] = {
            v.policy.name: PolicyTally(window_us=v.policy.window * 1_000_000)
            for v in selection.variants
        }
        self.outcome = Outcome(self.tallies)
        #: Each variant's exact twin of its sweep (``--algorithms``), by tally.
        self._exact = _exact_twins(selection.variants, self.tallies)
        self._matches: list[dict[tuple[str, str], list[CompiledPolicy]]] = [
            {} for _ in selection.scenarios
        ]
        self._users: dict[str, str | None] = {}
        self._exemptions = bool(exempt_networks())
        self._connection: Any = None
        self._mode = commands.SCRIPT
        self._sent: list[bytes] = []
        #: Per line waiting for replies: its time, then ``(record, targets)`` per call.
        self._waiting: list[tuple[int, list[_Targets]]] = []
        #: Batches sent whose replies are not read yet (at most two).
        self._in_flight: deque[list[tuple[int, list[_Targets]]]] = deque()

    def run(self, entries: Iterable[Entry]) -> Outcome:
        """Replays ``entries`` (in time order) and returns what was counted."""
        started = time.perf_counter()
        self._mode = self._load_code()
        pool = self.client.connection_pool
        try:
            self._connection = pool.get_connection()
        except TypeError:  # redis-py before 5.3 asks for a command name
            self._connection = pool.get_connection("FCALL")  # type: ignore[call-arg]
        try:
            for entry in entries:
                self._line(entry.line)
                if self.progress is not None and self.outcome.lines % PROGRESS_EVERY == 0:
                    self.progress(self.outcome.lines, time.perf_counter() - started)
            self._flush(wait=True)
        finally:
            self.client.connection_pool.release(self._connection)
            self._connection = None
        self.outcome.elapsed = time.perf_counter() - started
        if self.progress is not None:
            self.progress(self.outcome.lines, self.outcome.elapsed)
        return self.outcome

    def _load_code(self) -> str:
        """Loads the decide code as a live worker runs it: the function library where the
        server has Functions (Redis 7+, Valkey), else the script."""
        try:
            self.client.execute_command("FUNCTION", "LOAD", "REPLACE", scripts.library_source())
        except redis.ResponseError:
            self.client.script_load(scripts.decide_source())
            return commands.SCRIPT
        return commands.FUNCTION

    def _line(self, line: LogLine) -> None:
        outcome = self.outcome
        outcome.lines += 1
        at = line.time_us
        if outcome.start_us is None:
            outcome.start_us = at
        outcome.end_us = at
        if line.user is not None:
            outcome.with_user += 1
        if self._exemptions and is_exempt(line):
            outcome.exempt += 1
            return
        calls: list[_Targets] = []
        met = False
        for index, scenario in enumerate(self.selection.scenarios):
            policies = self._matching(index, scenario, line)
            if not policies:
                continue
            met = True
            checks: list[Check] = []
            targets: _Targets = []
            counting: list[bool] = []
            for policy in policies:
                tally = self.tallies[policy.name]
                found = identity_of(policy, line)
                if found is None:
                    tally.uncounted += 1
                    continue
                if found is UNSHOWN:
                    tally.unshown += 1
                    continue
                identity, who = found
                applied = policy
                if policy.overrides is not None:
                    applied = policy.for_client(self._user_key(line.user), identity)
                    if applied is None:  # an override exempts this client
                        tally.uncounted += 1
                        continue
                checks.append(Check(applied, identity, applied.pick_shard(), self._cost(line)))
                targets.append((tally, tally.seen(who, at)))
                counting.append(_counts(policy, line.status))
            if not checks:
                continue
            if all(counting) or not any(counting):
                self._queue(checks, record=all(counting), at=at)
                calls.append(targets)
            else:
                if calls:  # this line's calls so far, read before the two waited for
                    self._waiting.append((at, calls))
                    calls = []
                self._flush(wait=True)
                self._mixed(checks, targets, counting, at / 1_000_000, at)
        if not met:
            outcome.unmatched += 1
        if calls:
            self._waiting.append((at, calls))
            if len(self._sent) >= self.batch:
                self._flush()

    def _matching(self, index: int, scenario: Scenario, line: LogLine) -> list[CompiledPolicy]:
        cache = self._matches[index]
        key = (line.method, line.path)
        found = cache.get(key)
        if found is None:
            if len(cache) >= MATCH_CACHE:
                cache.clear()
            found = cache[key] = matching(scenario.table, line.method, line.path)
        return found

    def _cost(self, line: LogLine) -> int | None:
        if self.cost_field is None or line.fields is None:
            return None
        value = line.fields.get(self.cost_field)
        try:
            cost = int(str(value))
        except ValueError:
            cost = 0
        if cost < 1:
            self.outcome.bad_costs += 1
            return None
        return cost

    def _user_key(self, user: str | None) -> str | None:
        """The pk of the user the log names, for user overrides (``None``: no such user)."""
        if user is None:
            return None
        if user not in self._users:
            from django.contrib.auth import get_user_model

            model = get_user_model()
            found = model._default_manager.filter(**{model.USERNAME_FIELD: user}).first()
            self._users[user] = None if found is None else str(found.pk)
        return self._users[user]

    def _keys(self, checks: list[Check]) -> list[str]:
        return [
            build_key(
                self.prefix,
                check.identity,
                check.policy.name,
                check.policy.algorithm,
                check.shard if check.policy.shards > 1 else None,
            )
            for check in checks
        ]

    def _queue(self, checks: list[Check], *, record: bool, at: int) -> None:
        keys = self._keys(checks)
        if any(check.policy.calendar for check in checks):  # the period of the line's time
            call = decide_call(checks, record=record, now=at / 1_000_000, keys=keys)
        else:  # as decide_call packs a call on the clock, with the line's time in front
            head = bulk_strings([*keys, str(at), RECORD if record else LOOK])
            body = head + b"".join([check.wire_args for check in checks])
            parts = len(keys) + 2 + POLICY_SLOTS * len(checks)
            call = commands.DecideCall(len(keys), parts, body, not record)
        self._sent.append(commands.packed(self._mode, call))
        self.outcome.calls += 1

    def _mixed(
        self,
        checks: list[Check],
        targets: _Targets,
        counting: list[bool],
        now: float,
        at: int,
    ) -> None:
        """A call whose policies do not all count this line's status: look at all of them;
        when all admit, record for those that count (two calls, waited for)."""
        keys = self._keys(checks)
        look = self._call(decide_call(checks, record=False, now=now, keys=keys))
        if look[0]:
            spending = [c for c, counts in zip(checks, counting, strict=True) if counts]
            spent_keys = [k for k, counts in zip(keys, counting, strict=True) if counts]
            self._call(decide_call(spending, record=True, now=now, keys=spent_keys))
        self._decide(targets, look, at)

    def _call(self, call: commands.DecideCall) -> list[int]:
        self.outcome.calls += 1
        self._connection.send_packed_command([commands.packed(self._mode, call)])
        return self._connection.read_response()  # type: ignore[no-any-return]

    def _flush(self, *, wait: bool = False) -> None:
        """Sends the calls queued; reads the replies of the batch sent before (all of them
        with ``wait``), so that Redis decides one batch while the next is built."""
        if self._sent:
            self._connection.send_packed_command([b"".join(self._sent)])
            self._sent.clear()
            self._in_flight.append(self._waiting)
            self._waiting = []
        while len(self._in_flight) > (0 if wait else 1):
            self._read(self._in_flight.popleft())

    def _read(self, waiting: list[tuple[int, list[_Targets]]]) -> None:
        read = self._connection.read_response
        for at, calls in waiting:
            decided: dict[int, bool] | None = {} if self._exact else None
            for targets in calls:
                self._decide(targets, read(), at, decided)
            if decided:
                self._compare(decided)

    def _decide(
        self,
        targets: _Targets,
        reply: list[int],
        at: int,
        decided: dict[int, bool] | None = None,
    ) -> None:
        admitted = bool(reply[0])
        for index, (tally, client) in enumerate(targets):
            allowed = protocol.allows(reply, index)
            if admitted:
                tally.decided(client, True, at)
            elif not allowed:
                tally.decided(client, False, at)
            else:
                tally.denied_by_others += 1
            if decided is not None:
                decided[id(tally)] = admitted

    def _compare(self, decided: dict[int, bool]) -> None:
        for tally, exact in self._exact:
            mine = decided.get(id(tally))
            theirs = decided.get(id(exact))
            if mine is None or theirs is None or mine == theirs:
                continue
            if mine:
                tally.admitted_not_exact += 1
            else:
                tally.denied_not_exact += 1

    def measure_memory(self) -> None:
        """Each variant's mean Redis memory per client key (``MEMORY USAGE`` of a sample)."""
        for name, tally in self.tallies.items():
            pattern = f"{self.prefix}:*:{name}:*"
            sizes = []
            for key in self.client.scan_iter(match=pattern, count=1000):
                size = self.client.memory_usage(key, samples=0)
                if size is not None:
                    sizes.append(int(size))
                if len(sizes) >= MEMORY_SAMPLE:
                    break
            tally.memory_per_client = sum(sizes) / len(sizes) if sizes else None


def _counts(policy: CompiledPolicy, status: int | None) -> bool:
    """Whether ``policy`` spends on a response of ``status`` (unknown: it does)."""
    if policy.counts == "all" or status is None:
        return True
    failed = status >= 400
    return failed if policy.counts == "failures" else not failed


def _exact_twins(
    variants: list[Variant], tallies: dict[str, PolicyTally]
) -> list[tuple[PolicyTally, PolicyTally]]:
    """``(tally, its sweep's exact tally)`` for every variant swept over algorithms."""
    exact = {v.group: v for v in variants if v.shown.algorithm == EXACT and v.group >= 0}
    pairs = []
    for variant in variants:
        twin = exact.get(variant.group)
        if twin is not None and twin is not variant:
            pairs.append((tallies[variant.policy.name], tallies[twin.policy.name]))
    return pairs
