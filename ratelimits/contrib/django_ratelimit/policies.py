"""The policy a spec is decided by: the one in the database, written there with the
spec's rate the first time it is missing.

On each request the decorator looks its policy up by name in the worker's policy table
(no query). When the table does not hold it (not written yet, disabled, or deleted), the
row is read, and written with the spec's rate when there is none, once per table the
worker builds: a worker that has read the row uses it as the table would until its next
table, and a disabled row decides nothing. So a row written by the first request, by
``manage.py ratelimits adopt`` or by an operator is the truth from then on, and an edit
in the admin applies as for any policy.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async

from ratelimits.contrib.django_ratelimit.naming import policy_rows
from ratelimits.contrib.django_ratelimit.spec import Spec
from ratelimits.database.policy_source import with_overrides
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table.current import PolicyTable, aget_table, get_table
from ratelimits.models import Policy

#: By policy name: the table it was last missing from, and the policy read then
#: (``None``: disabled).
_seen: dict[str, tuple[PolicyTable, CompiledPolicy | None]] = {}


def policy_for(spec: Spec) -> CompiledPolicy | None:
    """The enabled policy ``spec`` is decided by; ``None`` when it is disabled."""
    table = get_table()
    known = _known(spec, table)
    if known is not _UNKNOWN:
        return known  # type: ignore[return-value]
    return _remember(spec, table, _compiled(written(spec)))


async def apolicy_for(spec: Spec) -> CompiledPolicy | None:
    """:func:`policy_for` from a coroutine: the database is read in a thread only when
    the table does not hold the policy."""
    table = await aget_table()
    known = _known(spec, table)
    if known is not _UNKNOWN:
        return known  # type: ignore[return-value]
    return _remember(spec, table, await sync_to_async(_read)(spec))


#: What :func:`_known` gives for a policy neither the table holds nor was read for it.
_UNKNOWN = object()


def _known(spec: Spec, table: PolicyTable) -> CompiledPolicy | object | None:
    """``spec``'s policy as ``table`` holds it, or as it was read while ``table`` was the
    worker's (``None``: disabled); :data:`_UNKNOWN` when it is neither."""
    found = table.get(spec.policy_name)
    if found is not None:
        return found
    held = _seen.get(spec.policy_name)
    if held is not None and held[0] is table:
        return held[1]
    return _UNKNOWN


def written(spec: Spec) -> Policy:
    """The row of ``spec``'s policy, created with its rate when there is none. Two
    workers that create it at once both end with the one row (the name is unique)."""
    (row,) = policy_rows(spec)
    name = row.pop("name")
    # get_or_create inserts in a savepoint and, on the unique name's IntegrityError (a
    # worker that wrote it first), reads the row that worker wrote.
    policy, _ = Policy.objects.get_or_create(name=name, defaults=row)
    return policy


def _read(spec: Spec) -> CompiledPolicy | None:
    return _compiled(written(spec))


def _compiled(row: Policy) -> CompiledPolicy | None:
    """``row`` as the table would hold it, with its overrides; ``None`` when disabled."""
    if not row.enabled:
        return None
    return with_overrides([CompiledPolicy.from_model(row)], {row.name: row.pk})[0]


def _remember(
    spec: Spec, table: PolicyTable, found: CompiledPolicy | None
) -> CompiledPolicy | None:
    _seen[spec.policy_name] = (table, found)
    return found


def reset() -> None:
    """Forget the rows read (tests)."""
    _seen.clear()
