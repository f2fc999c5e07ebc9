"""``check``: which policies a request would meet, and where this client stands in each."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.management.base import BaseCommand, CommandError
from django.test import RequestFactory
from django.urls import Resolver404, resolve

from ratelimits import connection, identity, limiter, policy_table
from ratelimits.cli import output
from ratelimits.policy_table import CompiledPolicy

COLUMNS = (
    "policy",
    "endpoint",
    "rate",
    "algorithm",
    "mode",
    "identity",
    "count",
    "remaining",
    "next",
)


def run_check(command: BaseCommand, options: dict[str, Any]) -> None:
    method = options["method"].upper()
    path = options["path"]
    if not path.startswith("/"):
        raise CommandError(f"--path {path!r} must start with /.")
    scope, url_name = _view_names(path)
    request = _request(method, path, options)
    policies = policy_table.load_table().match(
        method=method, path=path, scope=scope, url_name=url_name
    )
    checks, skipped = [], []
    for policy in policies:
        who = identity.request_identity(policy.key_kind, request, policy.header_meta_key)
        if who is None:
            skipped.append((policy, "does not count anonymous requests (give --user)"))
        elif who == identity.UNKNOWN_IP and options["ip"] is None:
            skipped.append((policy, "counts by address (give --ip)"))
        else:
            checks.append(limiter.Check(policy, who))
    _, verdict = limiter.peek(checks, connection.get_tool_client())
    if options["json"]:
        command.stdout.write(
            output.as_json(_record(method, path, scope, url_name, verdict, skipped))
        )
        return
    write = command.stdout.write
    write(f"{method} {path}: url name {url_name or '-'}, throttle_scope {scope or '-'}")
    if not policies:
        write("No enabled policy matches this request: it is not rate limited.")
        return
    rows = []
    for check, decision in zip(checks, verdict.decisions, strict=True):
        if decision.allowed:
            next_request = "allowed"
        else:
            next_request = f"denied ({output.seconds(decision.retry_after)})"
        rows.append(
            _row(check.policy, decision.identity, decision.count, decision.available, next_request)
        )
    rows.extend(_row(policy, None, None, None, f"not counted: {why}") for policy, why in skipped)
    write(output.table(COLUMNS, rows, numeric=("count", "remaining")))
    if verdict.allowed:
        write("The next request would be allowed.")
    else:
        denied = ", ".join(d.policy for d in verdict.decisions if d.blocks)
        write(
            f"The next request would be denied by {denied}; "
            f"retry in {output.seconds(verdict.retry_after)}."
        )


def _row(policy: CompiledPolicy, *cells: Any) -> list[Any]:
    mode = "enforce" if policy.enforce else "shadow"
    rate = f"{policy.limit} per {policy.window} s"
    return [policy.name, policy.endpoint, rate, policy.algorithm, mode, *cells]


def _view_names(path: str) -> tuple[str | None, str | None]:
    """The view's DRF ``throttle_scope`` and the URL name, as the throttle sees them."""
    try:
        match = resolve(path)
    except Resolver404:
        return None, None
    view_class = getattr(match.func, "cls", None) or getattr(match.func, "view_class", None)
    scope = getattr(view_class, "throttle_scope", None)
    return (scope if isinstance(scope, str) else None), match.view_name


def _request(method: str, path: str, options: dict[str, Any]) -> Any:
    if options["ip"] is not None:
        try:
            ipaddress.ip_address(options["ip"])
        except ValueError:
            raise CommandError(f"--ip {options['ip']!r} is not an IP address.") from None
    request = RequestFactory().generic(method, path, REMOTE_ADDR=options["ip"] or "")
    request.user = _user(options["user"]) if options["user"] else AnonymousUser()
    if options["header"]:
        name, sep, value = options["header"].partition("=")
        if not sep or not name.strip() or not value:
            raise CommandError("--header must be NAME=VALUE, e.g. --header X-Api-Key=abc123.")
        request.META[identity.meta_key(name.strip())] = value
    return request


def _user(username: str) -> Any:
    try:
        return identity.find_user(username)
    except ValueError:
        raise CommandError(f"--user: there is no user {username!r}.") from None


def _record(
    method: str, path: str, scope: str | None, url_name: str | None, verdict: Any, skipped: list
) -> dict[str, Any]:
    return {
        "method": method,
        "path": path,
        "url_name": url_name,
        "throttle_scope": scope,
        "allowed": verdict.allowed,
        "retry_after": verdict.retry_after,
        "policies": [
            {
                "policy": d.policy,
                "identity": d.identity,
                "enforce": d.enforce,
                "limit": d.limit,
                "window": d.window,
                "count": d.count,
                "remaining": d.available,
                "allowed": d.allowed,
                "retry_after": d.retry_after,
            }
            for d in verdict.decisions
        ]
        + [{"policy": p.name, "identity": None, "skipped": why} for p, why in skipped],
    }
