"""django-axes' settings read into the sign-in policies that admit the same attempts.

django-axes (``axes`` in ``INSTALLED_APPS``, its ``AXES_*`` settings) counts failed
sign-ins and locks out by the parameters it is told; ratelimits does it with sign-in
policies (``counts = "sign_in_failures"``) beside ``RateLimitBackend``. Each entry of
``AXES_LOCKOUT_PARAMETERS`` becomes one policy (axes locks when any entry reaches the
limit, and so do several policies): ``"username"`` the key ``username``,
``"ip_address"`` ``ip``, ``"user_agent"`` ``header:User-Agent``, and a list of two the pair
(``["username", "ip_address"]``: ``username+ip``).

=============================================  =========================================
``AXES_FAILURE_LIMIT`` (3)                     ``limit``
``AXES_COOLOFF_TIME`` (hours, a timedelta)     ``window`` and ``lockout``
``AXES_COOLOFF_TIME = None`` (the default)     ``lockout_until_lifted`` (window: 30 days)
``AXES_RESET_ON_SUCCESS``                      ``reset_on_success`` (policies with a
                                               username)
``AXES_RESET_COOL_OFF_ON_FAILURE_DURING_...``  ``extend_lockout``
``AXES_IP_BLACKLIST``                          overrides of limit 0 (a block-list)
``AXES_IP_WHITELIST`` with
``AXES_NEVER_LOCKOUT_WHITELIST``               exempt overrides
``AXES_ONLY_ADMIN_SITE``                       endpoint ``admin:login`` (else ``*``)
=============================================  =========================================

A setting the policies cannot hold (a callable cool-off, three parameters in one entry)
is reported and nothing is written for it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from ratelimits import validators
from ratelimits.tools.adoption.outcome import Adopted, AdoptionPlan, Skipped

#: The start of every policy adopted from django-axes.
PREFIX = "axes-"
#: axes' lockout parameters, as key kinds.
PARAMETERS = {"username": "username", "ip_address": "ip", "user_agent": "header:User-Agent"}
#: The order of a pair's kinds in a key (a header last).
_ORDER = ("username", "ip", "header:User-Agent")
#: The defaults of django-axes 8 for what is read here.
DEFAULTS: dict[str, Any] = {
    "AXES_ENABLED": True,
    "AXES_FAILURE_LIMIT": 3,
    "AXES_COOLOFF_TIME": None,
    "AXES_LOCKOUT_PARAMETERS": ["ip_address"],
    "AXES_RESET_ON_SUCCESS": False,
    "AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT": True,
    "AXES_IP_BLACKLIST": None,
    "AXES_IP_WHITELIST": None,
    "AXES_NEVER_LOCKOUT_WHITELIST": False,
    "AXES_ONLY_ADMIN_SITE": False,
}
#: What the plan says each policy replaces.
_WHAT = "django-axes' AXES_* settings"


def uses_axes() -> bool:
    """True when the site runs django-axes or sets one of its settings."""
    if "axes" in settings.INSTALLED_APPS or "axes.apps.AppConfig" in settings.INSTALLED_APPS:
        return True
    return any(name.startswith("AXES_") for name in dir(settings))


def setting(name: str) -> Any:
    """An ``AXES_*`` setting, or axes' default."""
    return getattr(settings, name, DEFAULTS[name])


def adopt_axes(plan: AdoptionPlan, mode: str, taken: set[str]) -> None:
    """Add to ``plan`` the sign-in policies doing what the site's ``AXES_*`` settings do
    (in ``mode``), naming each ``axes-<key>`` (not one of ``taken``, which it joins);
    each setting they cannot hold goes to ``plan.skipped``. Nothing without django-axes."""
    if not uses_axes():
        return
    if not setting("AXES_ENABLED"):
        plan.skipped.append(Skipped("AXES_ENABLED", [], "False: axes counts nothing"))
        return
    timing = _timing(plan)
    if timing is None:
        return
    keys = _keys(plan)
    limit = setting("AXES_FAILURE_LIMIT")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        why = f"must be a whole number >= 1 to be a limit, not {limit!r}"
        plan.skipped.append(Skipped("AXES_FAILURE_LIMIT", [], why))
        return
    endpoint = "admin:login" if setting("AXES_ONLY_ADMIN_SITE") else "*"
    rows = [_row(key, limit, endpoint, timing, mode, taken) for key in keys]
    _add_overrides(plan, rows)
    for row in rows:
        plan.adopted.append(Adopted(row, [], f"{_WHAT} ({row['key']})"))


def _timing(plan: AdoptionPlan) -> dict[str, Any] | None:
    """``window``, ``lockout``, ``lockout_until_lifted`` and ``extend_lockout`` from
    ``AXES_COOLOFF_TIME`` and ``AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT``."""
    cooloff = setting("AXES_COOLOFF_TIME")
    if cooloff is None:  # locked until an operator resets it
        return {
            "window": validators.MAX_WINDOW,
            "lockout": 0,
            "lockout_until_lifted": True,
            "extend_lockout": False,
        }
    if isinstance(cooloff, dt.timedelta):
        seconds = cooloff.total_seconds()
    elif isinstance(cooloff, int | float) and not isinstance(cooloff, bool):
        seconds = cooloff * 3600  # axes reads a number as hours
    else:
        why = (
            f"{cooloff!r} is computed per request; give the policies a window and a "
            "lockout in seconds"
        )
        plan.skipped.append(Skipped("AXES_COOLOFF_TIME", [], why))
        return None
    seconds = round(seconds)
    if not 1 <= seconds <= validators.MAX_WINDOW:
        why = f"{seconds} s is not a window (1 s to {validators.MAX_WINDOW} s)"
        plan.skipped.append(Skipped("AXES_COOLOFF_TIME", [], why))
        return None
    return {
        "window": seconds,
        "lockout": seconds,
        "lockout_until_lifted": False,
        "extend_lockout": bool(setting("AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT")),
    }


def _keys(plan: AdoptionPlan) -> list[str]:
    """The policy key of each entry of ``AXES_LOCKOUT_PARAMETERS`` it can express."""
    keys: list[str] = []
    for entry in setting("AXES_LOCKOUT_PARAMETERS") or ():
        names = [entry] if isinstance(entry, str) else list(entry)
        kinds = [PARAMETERS.get(name) for name in names]
        if not names or None in kinds or len(kinds) > 2 or len(set(kinds)) != len(kinds):
            why = (
                "ratelimits counts one parameter or a pair of two "
                "(username, ip_address, user_agent)"
            )
            plan.skipped.append(Skipped(f"AXES_LOCKOUT_PARAMETERS entry {entry!r}", [], why))
            continue
        key = "+".join(sorted(kinds, key=_ORDER.index))  # type: ignore[arg-type]
        if key not in keys:
            keys.append(key)
    return keys


def _row(
    key: str, limit: int, endpoint: str, timing: dict[str, Any], mode: str, taken: set[str]
) -> dict[str, Any]:
    name = _name(PREFIX + key.replace("+", "-").replace(":", "-").lower(), taken)
    return {
        "name": name,
        "endpoint": endpoint,
        "methods": "",
        "algorithm": "sliding_log",
        "limit": limit,
        "key": key,
        "mode": mode,
        "fail_open": False,  # a sign-in guard fails closed (check W040)
        "counts": "sign_in_failures",
        **timing,
        "reset_on_success": bool(setting("AXES_RESET_ON_SUCCESS")) and "username" in key,
        "overrides": [],
    }


def _name(base: str, taken: set[str]) -> str:
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    taken.add(name)
    return name


def _add_overrides(plan: AdoptionPlan, rows: list[dict[str, Any]]) -> None:
    """``AXES_IP_BLACKLIST`` as overrides of limit 0, and ``AXES_IP_WHITELIST`` (with
    ``AXES_NEVER_LOCKOUT_WHITELIST``) as exempt ones, on every policy counting the
    address; without one, on a policy of their own keyed ``ip``."""
    blocked = list(setting("AXES_IP_BLACKLIST") or ())
    exempt = (
        list(setting("AXES_IP_WHITELIST") or ()) if setting("AXES_NEVER_LOCKOUT_WHITELIST") else []
    )
    if not blocked and not exempt:
        return
    overrides = [{"identity": ip, "limit": 0, "comment": "AXES_IP_BLACKLIST"} for ip in blocked]
    overrides += [
        {"identity": ip, "exempt": True, "comment": "AXES_IP_WHITELIST"}
        for ip in exempt
        if ip not in blocked  # axes: the block-list takes precedence
    ]
    by_address = [row for row in rows if "ip" in row["key"].split("+")]
    if not by_address and rows:
        # Only the lists: a limit no client reaches, and no lockout of its own.
        holder = {
            **rows[0],
            "name": f"{PREFIX}ip-lists",
            "key": "ip",
            "limit": validators.MAX_LIMIT,
            "window": 60,
            "lockout": 0,
            "lockout_until_lifted": False,
            "extend_lockout": False,
            "reset_on_success": False,
        }
        rows.append(holder)
        by_address = [holder]
    for row in by_address:
        row["overrides"] = [dict(override) for override in overrides]
