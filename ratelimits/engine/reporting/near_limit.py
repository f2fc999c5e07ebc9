"""Near the limit: the admitted request that takes a client's count to a fraction of its
limit (``RATELIMITS["NEAR_LIMIT"]``, 0.8 by default), like Envoy's ``near_limit``.

A policy's decision is near the limit when the request was admitted and recorded, and its
count went from below ``NEAR_LIMIT * limit`` to at or above it with this request's units:
``count < threshold <= count + units``, from the numbers the reply already gives (no Redis
call). So a client of a policy of 10 at 0.8 crosses with its 8th request, once; a request
of cost 3 from 6 to 9 crosses too. The limit is the one that applied to the client: an
override's, and a shard's share for a sharded policy (each shard counts apart); for a
``token_bucket``, the bucket's size, its burst. A ``concurrency`` policy counts requests in
progress, so its 8th at once crosses. A count that falls below the threshold again (old
requests leave a sliding window, slots come back) can cross again: each crossing counts.

A shadow policy's decision counts the same: shadow mode shows what enforcing would do. A
denied request (or one a shadow policy would deny) is never near the limit; nor is a look
that records nothing, or a decision Redis could not make.
"""

from __future__ import annotations

from collections.abc import Sequence

from ratelimits.conf import app_settings, resets_on_setting_change
from ratelimits.engine.decision import Decision
from ratelimits.engine.policy.compiled import Check

#: Below any count the replies carry (thousandths), above a float product's error:
#: ``0.14 * 50`` is ``7.000000000000001``, and 7 units must reach it.
_SLACK = 1e-9

#: The setting, validated: ``-1.0`` until read (again after ``RATELIMITS`` changes),
#: ``0.0`` when it is invalid (``manage.py check`` reports it), else the fraction. Kept
#: here so that a request pays neither the settings lookup nor the validation.
_fraction = -1.0


def crossed(checks: Sequence[Check], decisions: Sequence[Decision]) -> tuple[Decision, ...]:
    """The ``decisions`` of an admitted, recorded request (one per check, in order) whose
    count the request took to the setting's fraction of the limit. An invalid setting
    finds none."""
    fraction = _fraction if _fraction >= 0 else _load()
    if not fraction:
        return ()
    found: tuple[Decision, ...] = ()
    # Not zip(..., strict=...): a keyword to a builtin costs more than this loop's body.
    for index, decision in enumerate(decisions):
        if decision.allowed:
            check = checks[index]
            count = decision.count
            threshold = fraction * check.policy.capacities[check.shard] - _SLACK
            if count < threshold <= count + check.units:
                found += (decision,)
    return found


def _load() -> float:
    global _fraction
    value = app_settings.NEAR_LIMIT
    valid = type(value) in (int, float) and 0 < value <= 1
    _fraction = float(value) if valid else 0.0
    return _fraction


@resets_on_setting_change("RATELIMITS")
def _forget_fraction() -> None:
    global _fraction
    _fraction = -1.0
