"""The policy-file rows adoption writes: a DRF counter as a policy, and the fields an
operator keeps when adoption runs again."""

from __future__ import annotations

from typing import Any

from django.utils.text import slugify

from ratelimits.models import Policy
from ratelimits.tools.adoption.throttles import ANON, USER, Counter
from ratelimits.tools.policy_files import FIELDS

#: The start of the name of every policy adopted from a DRF counter: how a later run finds
#: them once the site's views are under ``PolicyThrottle``.
PREFIX = "drf-"
#: The mode of a policy adoption writes for the first time, unless told another.
FIRST_MODE = "shadow"
#: Fields of a stored policy an adoption leaves as they are (adoption decides the others,
#: from what the old throttle did): what to do when Redis is down, whether it is on, and
#: how IPv6 clients are grouped.
KEPT_FIELDS = ("fail_open", "enabled", "ipv6_prefix")
#: The policy key counting the clients a DRF throttle counts.
KEYS = {USER: "user_or_ip", ANON: "anon"}
#: How many characters of a scope a policy's name keeps (a name is at most 64).
_NAME_ROOM = 56


def policy_name(scope: str, taken: set[str]) -> str:
    """``drf-<scope>`` as a slug, not one of ``taken`` (which it joins)."""
    base = PREFIX + (slugify(scope)[:_NAME_ROOM] or "scope")
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    taken.add(name)
    return name


def counter_row(
    name: str, endpoint: str, counter: Counter, mode: str, *, cost: int = 1
) -> dict[str, Any]:
    """The policy replacing DRF's ``counter``: the same sliding log of admissions, limit
    and window, every method, and the same clients: a user by id and an anonymous client
    by address (``user_or_ip``), or an anonymous client alone by address (``anon``).
    ``cost`` is how many of the counter's entries DRF records per request (one per
    throttle of the view keeping that counter)."""
    return {
        "name": name,
        "endpoint": endpoint,
        "methods": "",
        "algorithm": "sliding_log",
        "limit": counter.limit,
        "window": counter.window,
        "key": KEYS[counter.counts],
        "mode": mode,
        "shards": 1,
        "burst": None,
        "cost": cost,
        "counts": "all",
        "calendar": "",
        "time_zone": "",
        "lockout": 0,
    }


def adopted_policies(exclude: set[str]) -> list[Policy]:
    """The stored policies adopted from DRF counters (named :data:`PREFIX`…), by name,
    but those named in ``exclude``."""
    found = Policy.objects.filter(name__startswith=PREFIX).exclude(name__in=exclude)
    return list(found.order_by("name"))


def stored_row(policy: Policy) -> dict[str, Any]:
    """``policy`` as a policy-file row, its overrides left as they are."""
    return {field: getattr(policy, field) for field in FIELDS}


def with_kept_fields(rows: list[dict[str, Any]], *, keep_mode: bool) -> list[dict[str, Any]]:
    """``rows``, each naming a stored policy given that policy's :data:`KEPT_FIELDS` (a
    row that sets one itself keeps its own), and its mode too with ``keep_mode``."""
    names = [row["name"] for row in rows if isinstance(row.get("name"), str)]
    stored = {policy.name: policy for policy in Policy.objects.filter(name__in=names)}
    merged = []
    for row in rows:
        policy = stored.get(row.get("name"))  # type: ignore[arg-type]
        kept = {} if policy is None else {f: getattr(policy, f) for f in KEPT_FIELDS}
        full = {**row, **{f: v for f, v in kept.items() if f not in row}}
        if keep_mode and policy is not None:
            full["mode"] = policy.mode
        ordered = {f: full.pop(f) for f in FIELDS if f in full}
        merged.append({**ordered, **full})
    return merged
