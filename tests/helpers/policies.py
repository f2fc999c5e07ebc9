"""Policies: compiled ones for the engine, saved ones for the faces, and a site with overrides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group, User

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy, PolicyOverride


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


def username_sign_in_policy(limit: int, **fields: Any) -> Policy:
    """``sign-in-username``: ``limit`` failed sign-ins per attempted username in 10
    minutes, on every path, failing closed."""
    return create_policy(
        "sign-in-username",
        "*",
        limit=limit,
        window=600,
        key="username",
        counts="sign_in_failures",
        fail_open=False,
        **fields,
    )


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
