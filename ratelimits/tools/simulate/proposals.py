"""Where a replay's policies come from: the saved ones (with their overrides), a policy
file as ``import`` reads it, or one proposed on the command line."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError

from ratelimits import validators
from ratelimits.database import policy_source
from ratelimits.engine.keys import kinds
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.tools import policy_files


def saved(names: Sequence[str] = ()) -> list[CompiledPolicy]:
    """The enabled saved policies, compiled with their overrides (only ``names``, when
    given; ``ValueError`` naming one that is not an enabled policy)."""
    found = list(policy_source.load())
    if not names:
        return found
    by_name = {policy.name: policy for policy in found}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise ValueError(f"no enabled policy named {', '.join(missing)}")
    return [by_name[name] for name in dict.fromkeys(names)]


def from_file(text: str, fmt: str, source: str) -> list[CompiledPolicy]:
    """The enabled policies of a policy file (``import``'s format and checks; its
    overrides are not applied). :class:`~ratelimits.tools.policy_files.PolicyFileError`
    when ``import`` would refuse it."""
    rows = policy_files.parse_document(text, fmt, source)
    plan = policy_files.plan_import(rows)
    rows_by_name = [*plan.created, *(policy for policy, _ in plan.updated), *plan.unchanged]
    return [
        CompiledPolicy.from_model(policy)
        for policy in sorted(rows_by_name, key=lambda p: p.name)
        if policy.enabled
    ]


def proposed(
    *,
    endpoint: str,
    algorithm: str,
    limit: int,
    window: int,
    key: str,
    methods: str = "",
    counts: str = "all",
    cost: int = 1,
    name: str = "proposed",
) -> CompiledPolicy:
    """A policy that is not saved, from its fields (``ValueError`` for a bad one)."""
    for check, value, what in (
        (validators.validate_endpoint, endpoint, "--endpoint"),
        (kinds.validate_key, key, "--key"),
        (validators.validate_methods, methods, "--methods"),
    ):
        try:
            check(value)
        except ValidationError as e:
            raise ValueError(f"{what} {value!r}: {' '.join(e.messages)}") from None
    if limit < 1 or window < 1:
        raise ValueError("--limit and --window must be at least 1")
    return CompiledPolicy.build(
        name=name,
        endpoint=endpoint,
        algorithm=algorithm,
        limit=limit,
        window=window,
        key=key,
        methods=methods,
        counts=counts,
        cost=cost,
    )
