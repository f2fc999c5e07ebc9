"""``check``: which policies a request would meet, and where this client stands in each."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import RequestFactory
from django.urls import Resolver404, resolve

from ratelimits.cli import output, records
from ratelimits.cli.subcommand import Subcommand, add_json
from ratelimits.engine import global_mode as mode
from ratelimits.engine import limiter
from ratelimits.engine.keys.identity import UNKNOWN_IP, meta_key
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.policy.overrides import Exemption
from ratelimits.engine.store import connection
from ratelimits.engine.table import current as table
from ratelimits.http import request_facts
from ratelimits.tools.identities import find_user

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
#: With overrides among the matched policies, which one applied goes after the identity.
OVERRIDE_COLUMNS = (*COLUMNS[:6], "override", *COLUMNS[6:])
#: ``override`` of a client that ``EXEMPT_NETWORKS`` exempts from every policy.
EXEMPT_NETWORKS = "EXEMPT_NETWORKS"
#: The last line under a ``RATELIMITS["MODE"]`` other than ``"enforce"``.
MODE_NOTES = {
    mode.SHADOW: 'RATELIMITS["MODE"] is "shadow": every policy counts, none denies.',
    mode.OFF: 'RATELIMITS["MODE"] is "off": no policy is decided; every request goes through.',
}


def run_check(command: BaseCommand, options: dict[str, Any]) -> None:
    method = options["method"].upper()
    path = options["path"]
    if not path.startswith("/"):
        raise CommandError(f"--path {path!r} must start with /.")
    scope, url_name = _view_names(path)
    request = _request(method, path, options)
    loaded = table.load_table()  # leaves out, logging, a row this machine cannot compile
    policies = loaded.match(method=method, path=path, scope=scope, url_name=url_name)
    exempt_network = request_facts.is_exempt(request)
    user_key = request_facts.user_key(request)
    checks: list[limiter.Check] = []
    exempt: list[tuple[CompiledPolicy, str, str]] = []  # (policy, identity, which rule)
    skipped: list[tuple[CompiledPolicy, str]] = []
    for policy in policies:
        who = request_facts.policy_identity(request, policy)
        if who is None:
            skipped.append((policy, _uncounted(policy)))
        elif who == UNKNOWN_IP and options["ip"] is None:
            skipped.append((policy, "counts by address (give --ip)"))
        elif exempt_network:  # the throttle applies no policy to these addresses
            exempt.append((policy, who, EXEMPT_NETWORKS))
        else:
            rule = policy.rule_for(
                user_key,
                who,
                lambda p=policy: request_facts.previous_identities(request, p),
            )
            if isinstance(rule, Exemption):
                exempt.append((policy, who, rule.override))
            else:
                checks.append(limiter.Check(rule, who))
    _, verdict = limiter.peek(checks, connection.get_tool_client())
    if options["json"]:
        asked = {"method": method, "path": path, "url_name": url_name, "throttle_scope": scope}
        overrides = [check.policy.override for check in checks]
        record = records.check_record(asked, verdict, overrides, exempt, skipped)
        command.stdout.write(output.as_json(record))
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
        applied = check.policy
        cells = (decision.count, decision.available, next_request)
        rows.append(_row(applied, decision.identity, applied.override or "-", *cells))
    for policy, who, rule in exempt:
        cells = (None, None, "not counted: exempt")
        rows.append(_row(policy, who, f"exempt ({rule})", *cells, rate="-"))
    rows.extend(
        _row(policy, None, "-", None, None, f"not counted: {why}") for policy, why in skipped
    )
    columns = OVERRIDE_COLUMNS
    # Like keys' note column: the override column only when a policy has overrides.
    if not exempt_network and all(policy.overrides is None for policy in policies):
        columns = COLUMNS
        rows = [row[:6] + row[7:] for row in rows]
    write(output.table(columns, rows, numeric=("count", "remaining")))
    if verdict.allowed:
        write("The next request would be allowed.")
    else:
        denied = ", ".join(d.policy for d in verdict.decisions if d.blocks)
        write(
            f"The next request would be denied by {denied}; "
            f"retry in {output.seconds(verdict.retry_after)}."
        )
    note = MODE_NOTES.get(mode.current())
    if note is not None:
        write(note)


def _uncounted(policy: CompiledPolicy) -> str:
    """Why ``policy`` gives the request no identity: it has a user, or it has none."""
    if policy.kind.name == "anon":
        return "does not count signed-in users (leave out --user)"
    return "does not count anonymous requests (give --user)"


def _row(policy: CompiledPolicy, *cells: Any, rate: str | None = None) -> list[Any]:
    """A row of :data:`OVERRIDE_COLUMNS`: the policy (as applied), then ``cells``."""
    mode = "enforce" if policy.enforce else "shadow"
    rate = rate or policy.rate_display
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
        request.META[meta_key(name.strip())] = value
    return request


def _user(username: str) -> Any:
    try:
        return find_user(username)
    except ValueError:
        raise CommandError(f"--user: there is no user {username!r}.") from None


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("--path", required=True, help="The request path, e.g. /api/login/.")
    parser.add_argument("--method", default="GET", help="The HTTP method (default GET).")
    parser.add_argument("--user", metavar="USERNAME", help="As this logged-in user.")
    parser.add_argument("--ip", metavar="ADDR", help="From this client address.")
    parser.add_argument(
        "--header", metavar="NAME=VALUE", help="With this header, for header:<Name> policies."
    )
    add_json(parser)


SUBCOMMAND = Subcommand(
    "check",
    "Which policies a request would meet, and this client's state in each.",
    add_arguments,
    run_check,
)
