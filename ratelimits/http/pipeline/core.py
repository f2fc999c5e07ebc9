"""The face pipeline without I/O: prepare, decide, settle, as a generator.

:func:`plan` yields each step that needs I/O (the policy table, the user, the decide
call, the signals, the 429) and is sent what the step gave; it returns the
:class:`Passage`. A sync driver and an async one run the steps
(:mod:`ratelimits.http.pipeline.drivers`), as :func:`ratelimits.engine.store.commands.recover`
is driven by the sync and the async caller.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse

from ratelimits.engine import global_mode as mode
from ratelimits.engine.decision import Verdict
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.table.current import PolicyTable
from ratelimits.http import after_response, request_facts
from ratelimits.http.headers import DECISIONS_ATTRIBUTE, attach_decisions
from ratelimits.signals import Announcement, announcements

#: The ``counts`` decided before a framework's authentication (``before_authentication``).
_FAILURES = "failures"


@dataclass(frozen=True, slots=True)
class Ask:
    """What a face asks the pipeline to do for one request.

    ``sender`` is the face, as the signals name it; ``scope`` and ``cost`` are the view's
    (see :func:`ratelimits.http.request_facts.request_cost`). ``before_authentication`` decides
    only the policies that count failures (see :func:`ratelimits.http.view_asks.check`).
    ``policies``, when given, are the face's own choice instead of the table's match
    (DRF's ``get_policies``); ``identity_of``, when given, says who a request counts as
    instead of each policy's key kind (DRF's ``get_identity``); ``status_of`` tells the
    response's status when no middleware sees it. A face that ``answers`` a denial itself
    gets the 429 of :mod:`ratelimits.http.responses`.

    A sign-in (:mod:`ratelimits.http.sign_in`) asks with ``sign_in``: only the sign-in
    policies match, the attempted ``username`` is a fact the key kinds read, and
    ``outcome`` tells whether the attempt failed once the response is made, in place of
    the response's status."""

    sender: object
    scope: str | None = None
    cost: Any = None
    before_authentication: bool = False
    policies: list[CompiledPolicy] | None = None
    identity_of: request_facts.IdentityOf | None = None
    status_of: Callable[[], int] | None = None
    answers: bool = False
    sign_in: bool = False
    username: str | None = None
    outcome: Callable[[], int] | None = None


@dataclass(frozen=True, slots=True)
class Passage:
    """What the pipeline made of a request: the ``verdict`` (``None``: no policy to
    decide) and, for a face that answers, the 429 to return (``None``: go on)."""

    verdict: Verdict | None = None
    refusal: HttpResponse | None = None


#: The step that asks for the policy table; sent back a :class:`PolicyTable`.
TABLE = "table"
#: The step that asks for ``request.user`` to be loaded (a coroutine may not touch a
#: lazy user); sent back nothing.
USER = "user"


@dataclass(frozen=True, slots=True)
class Decide:
    """Decide ``checks`` in one call; sent back the :class:`Verdict`."""

    checks: list[Check]


@dataclass(frozen=True, slots=True)
class Announce:
    """Send ``sent`` from ``sender`` (:mod:`ratelimits.signals`); sent back nothing."""

    sender: object
    sent: list[Announcement]


@dataclass(frozen=True, slots=True)
class Refuse:
    """Make the 429 for a denied request; sent back the response."""

    verdict: Verdict


Step = str | Decide | Announce | Refuse
#: :func:`plan`: yields steps, is sent what each gave, returns the :class:`Passage`.
Plan = Generator[Step, Any, Passage]

_NOTHING = Passage()


def plan(request: Any, ask: Ask) -> Plan:
    """The pipeline for ``request``: the policies it falls under that no face has decided
    yet, decided at once; then their decisions kept on the request, what the request
    holds handed to :mod:`ratelimits.http.after_response`, the signals sent, and the 429 of a
    face that answers. With ``RATELIMITS["MODE"]`` ``"off"`` nothing is asked: no table,
    no call."""
    if mode.is_off():
        return _NOTHING
    policies = ask.policies
    if policies is None:
        table: PolicyTable = yield TABLE
        policies = matching(request, ask.scope, table, ask.before_authentication, ask.sign_in)
    if not ask.sign_in:  # every attempt counts, however many one request makes
        policies = undecided(request, policies)
    if not policies:
        return _NOTHING
    if any(p.kind.needs_user or p.overrides is not None for p in policies):
        yield USER
    units = None if ask.sign_in else request_facts.request_cost(ask.cost, request)
    known = request_facts.RequestFacts(request, username=ask.username)
    checks = request_facts.checks_for(request, policies, ask.identity_of, units, known)
    if not checks and ask.sign_in:
        return _NOTHING
    verdict: Verdict = yield Decide(checks)
    attach_decisions(request, verdict.decisions)
    if verdict.receipt is not None:
        after_response.hold(request, verdict.receipt, ask.status_of, outcome=ask.outcome)
    sent = announcements(verdict, known)
    if sent:
        yield Announce(ask.sender, sent)
    if ask.answers and not verdict.allowed:
        return Passage(verdict, (yield Refuse(verdict)))
    return Passage(verdict)


def undecided(request: Any, policies: list[CompiledPolicy]) -> list[CompiledPolicy]:
    """``policies`` without those another face already decided for ``request``."""
    if policies:
        made = getattr(getattr(request, "_request", request), DECISIONS_ATTRIBUTE, None)
        if made:
            names = {decision.policy for decision in made}
            return [policy for policy in policies if policy.name not in names]
    return policies


def matching(
    request: Any,
    scope: str | None,
    table: PolicyTable,
    before_authentication: bool = False,
    sign_in: bool = False,
) -> list[CompiledPolicy]:
    """The policies of ``table`` that ``request`` falls under; ``before_authentication``:
    only those that count failures; ``sign_in``: the sign-in policies, which only a
    sign-in attempt falls under."""
    policies = table.match(
        method=request.method,
        path=request.path,
        scope=scope,
        url_name=request_facts.url_name(request),
        sign_in=sign_in,
    )
    if before_authentication:
        return [policy for policy in policies if policy.counts == _FAILURES]
    return policies
