"""Database checks of the policies: calendar zones this machine knows (W005), policies
against guessing that fail open (W040), and sign-in protection wired as its policies need
(W020-W022)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.db import DatabaseError
from django.db.models import Q

from ratelimits.checks.names import LIMITER_MIDDLEWARE_PATH, SIGN_IN_BACKEND_PATH
from ratelimits.engine.policy import periods, rules
from ratelimits.models import Policy

#: The ``counts`` of a policy against guessing (with any policy that has a lockout): W040.
GUESSING_COUNTS = ("failures", "sign_in_failures")


@register(Tags.database)
def check_time_zones(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Any]:
    """W005: an enabled calendar policy whose time zone this machine does not know (its
    time zone database lacks it, or has none: no ``tzdata``). Reads the policies, so it
    runs as Django's database checks do: on ``migrate`` and ``check --database``."""
    found: list[Any] = []
    for alias in databases or ():
        rows = Policy.objects.using(alias).filter(enabled=True).exclude(calendar="")
        try:
            named = list(rows.order_by("name").values_list("name", "time_zone"))
        except DatabaseError:  # not migrated yet: migrate runs these checks first
            continue
        for name, time_zone in named:
            zone = rules.calendar_zone(time_zone)
            try:
                periods.zone(zone)
            except periods.UnknownTimeZone:
                found.append(_unknown_zone(name, zone, time_zone))
    return found


@register(Tags.database, Tags.security)
def check_guessing_fails_closed(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """W040: an enabled policy against guessing (it counts failures or failed sign-ins, or
    has a lockout) that fails open: whoever makes Redis unavailable (a flood, a failover)
    gets unlimited guesses meanwhile. A database check, as W005."""
    found: list[Any] = []
    for alias in databases or ():
        rows = (
            Policy.objects.using(alias)
            .filter(enabled=True, fail_open=True)
            .filter(Q(counts__in=GUESSING_COUNTS) | Q(lockout__gt=0))
        )
        try:
            named = list(rows.order_by("name").values_list("name", "counts", "lockout"))
        except DatabaseError:  # not migrated yet: migrate runs these checks first
            continue
        for name, counts, lockout in named:
            kind = "has a lockout" if lockout else f"counts {counts}"
            found.append(
                Warning(
                    f"The policy {name!r} {kind}, a guard against guessing, but fails open: "
                    "while Redis cannot answer it lets every attempt through, so whoever "
                    "can make Redis unavailable gets unlimited guesses.",
                    hint="Untick fail_open on the policy in the admin (deny while Redis "
                    "cannot answer), or silence ratelimits.W040 if availability matters "
                    "more here.",
                    id="ratelimits.W040",
                )
            )
    return found


def _unknown_zone(policy: str, zone: str, given: str) -> Warning:
    where = "" if given else " (its time_zone is blank: the site's TIME_ZONE)"
    return Warning(
        f"The policy {policy!r} counts calendar periods in the time zone {zone!r}{where}, "
        "which this machine's time zone database does not know: it cannot be compiled "
        "here, so the policy table leaves it out and it limits nothing.",
        hint="Install the IANA time zone database (pip install tzdata, or the system's "
        "tzdata package), or give the policy a time zone this machine knows, such as "
        "UTC, in the admin.",
        id="ratelimits.W005",
    )


@register(Tags.security)
def check_sign_in_backend(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W020: ``RateLimitBackend`` listed after another authentication backend, which then
    checks a password before the sign-in policies can refuse the attempt."""
    backends = list(getattr(settings, "AUTHENTICATION_BACKENDS", ()) or ())
    if SIGN_IN_BACKEND_PATH not in backends or backends[0] == SIGN_IN_BACKEND_PATH:
        return []
    return [
        Warning(
            f"{SIGN_IN_BACKEND_PATH} is not first in AUTHENTICATION_BACKENDS: the backends "
            "above it check passwords before the sign-in policies are asked, so a "
            "password is still tried, and a right one accepted, while a sign-in policy "
            "would refuse the attempt.",
            hint=f"Move '{SIGN_IN_BACKEND_PATH}' to the top of AUTHENTICATION_BACKENDS.",
            id="ratelimits.W020",
        )
    ]


@register(Tags.database)
def check_sign_in_policies(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """W021: an enabled sign-in policy with no ``RateLimitBackend`` to decide it; W022: an
    enabled failures policy while ``RateLimitMiddleware``, which counts a DRF or
    django-ninja view's failed authentication, is not installed. Database checks."""
    backends = list(getattr(settings, "AUTHENTICATION_BACKENDS", ()) or ())
    middleware = list(getattr(settings, "MIDDLEWARE", ()) or ())
    found: list[Any] = []
    for alias in databases or ():
        enabled = Policy.objects.using(alias).filter(enabled=True).order_by("name")
        try:
            sign_in = list(enabled.filter(counts="sign_in_failures").values_list("name", flat=True))
            failures = list(enabled.filter(counts="failures").values_list("name", flat=True))
        except DatabaseError:  # not migrated yet: migrate runs these checks first
            continue
        if sign_in and SIGN_IN_BACKEND_PATH not in backends:
            found.append(
                Warning(
                    f"The sign-in policies {', '.join(sign_in)} count failed sign-ins, but "
                    f"{SIGN_IN_BACKEND_PATH} is not in AUTHENTICATION_BACKENDS: nothing "
                    "counts or refuses a sign-in.",
                    hint=f"Put '{SIGN_IN_BACKEND_PATH}' first in AUTHENTICATION_BACKENDS.",
                    id="ratelimits.W021",
                )
            )
        if failures and LIMITER_MIDDLEWARE_PATH not in middleware:
            found.append(
                Warning(
                    f"The policies {', '.join(failures)} count failures, but "
                    "RateLimitMiddleware is not in MIDDLEWARE: DRF and django-ninja "
                    "authenticate before their throttles run, so a wrong password, token "
                    "or API key on their views is never counted.",
                    hint=f"Add '{LIMITER_MIDDLEWARE_PATH}' to MIDDLEWARE, below Django's "
                    "AuthenticationMiddleware.",
                    id="ratelimits.W022",
                )
            )
    return found
