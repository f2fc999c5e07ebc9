"""Checks of the ``RATELIMITS`` setting itself: its type, keys and values (E001,
E002, W003), ``THROTTLED_VIEW`` (E006) and ``MODE`` (E007)."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from ratelimits.conf import DEFAULTS, user_settings
from ratelimits.engine import global_mode as mode
from ratelimits.engine.keys import names as keys
from ratelimits.engine.store import cluster
from ratelimits.http import nat64
from ratelimits.http.proxies import FORWARDED_HEADERS, parse_network

_POSITIVE_NUMBERS = (
    "SOCKET_TIMEOUT",
    "POLICY_REFRESH_INTERVAL",
    "POLICY_MAX_AGE",
    "BREAKER_COOLDOWN",
    "METRICS_FLUSH_INTERVAL",
    "SIGN_IN_AUDIT_FLUSH_INTERVAL",
)


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    raw = getattr(settings, "RATELIMITS", None)
    if raw is not None and not isinstance(raw, dict):
        return [
            Error(
                "RATELIMITS must be a dict.",
                hint="For example RATELIMITS = {'CACHE': 'default'}.",
                id="ratelimits.E001",
            )
        ]
    errors: list[Any] = []
    given = user_settings()
    for name in sorted(set(given) - set(DEFAULTS)):
        errors.append(
            Warning(
                f"RATELIMITS has an unknown setting {name!r}; it is ignored.",
                hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                id="ratelimits.W003",
            )
        )
    value = {**DEFAULTS, **given}
    problems: list[str] = []
    if not isinstance(value["KEY_PREFIX"], str) or not keys.PREFIX_PATTERN.match(
        value["KEY_PREFIX"]
    ):
        problems.append("KEY_PREFIX must be 1 to 32 characters from A-Z a-z 0-9 _ . : -")
    for name in _POSITIVE_NUMBERS:
        if not _is_number(value[name]) or value[name] <= 0:
            problems.append(f"{name} must be a number greater than 0")
    for name in ("NUM_PROXIES", "FAIL_CLOSED_RETRY_AFTER", "LOCAL_DENIALS"):
        if not _is_integer(value[name]) or value[name] < 0:
            problems.append(f"{name} must be an integer >= 0")
    if not _is_integer(value["BREAKER_THRESHOLD"]) or value["BREAKER_THRESHOLD"] < 1:
        problems.append("BREAKER_THRESHOLD must be an integer >= 1")
    if not _is_integer(value["MAX_COST"]) or value["MAX_COST"] < 1:
        problems.append("MAX_COST must be an integer >= 1")
    if value["SIGN_IN_AUDIT"] not in (None, True, False):
        problems.append("SIGN_IN_AUDIT must be True or False")
    if not _is_integer(value["SIGN_IN_AUDIT_RETENTION"]) or value["SIGN_IN_AUDIT_RETENTION"] < 1:
        problems.append("SIGN_IN_AUDIT_RETENTION must be a whole number of days >= 1")
    if value["SIGN_IN_ACCOUNT"] is not None and not _imports_callable(value["SIGN_IN_ACCOUNT"]):
        problems.append(
            "SIGN_IN_ACCOUNT must be the dotted path of a callable (request, credentials), "
            f"not {value['SIGN_IN_ACCOUNT']!r}"
        )
    if not isinstance(value["SIGN_IN_LOG_USERNAMES"], bool):
        problems.append("SIGN_IN_LOG_USERNAMES must be True or False")
    if value["DJANGO_RATELIMIT_BLOCK"] not in ("429", "raise"):
        problems.append("DJANGO_RATELIMIT_BLOCK must be '429' or 'raise'")
    if not _is_integer(value["IPV6_PREFIX"]) or not 0 <= value["IPV6_PREFIX"] <= 128:
        problems.append("IPV6_PREFIX must be an integer from 0 to 128")
    if not _is_number(value["NEAR_LIMIT"]) or not 0 < value["NEAR_LIMIT"] <= 1:
        problems.append(
            "NEAR_LIMIT must be a number greater than 0 and at most 1 (a fraction of the "
            f"limit, such as 0.8), not {value['NEAR_LIMIT']!r}"
        )
    problems.extend(_cluster_node_problems(value["CLUSTER_NODES"]))
    problems.extend(_exempt_network_problems(value["EXEMPT_NETWORKS"]))
    problems.extend(
        _exempt_network_problems(value["METRICS_ALLOWED_NETWORKS"], "METRICS_ALLOWED_NETWORKS")
    )
    problems.extend(_trusted_proxy_problems(value["TRUSTED_PROXIES"]))
    problems.extend(_forwarded_header_problems(value["FORWARDED_HEADER"]))
    problems.extend(_nat64_prefix_problems(value["NAT64_PREFIXES"]))
    errors.extend(
        Error(
            f"RATELIMITS: {problem}.",
            hint="See docs/settings.md: each setting, its default and the values it takes.",
            id="ratelimits.E002",
        )
        for problem in problems
    )
    return errors


def _exempt_network_problems(networks: Any, name: str = "EXEMPT_NETWORKS") -> list[str]:
    if not isinstance(networks, (list, tuple)) or not all(isinstance(n, str) for n in networks):
        return [f"{name} must be a list of networks such as '10.0.0.0/8'"]
    problems = []
    for network in networks:
        try:
            ipaddress.ip_network(network.strip(), strict=False)
        except ValueError:
            problems.append(f"{name}: {network!r} is not an IP address or network")
    return problems


def _trusted_proxy_problems(entries: Any) -> list[str]:
    if not isinstance(entries, (list, tuple)):
        return ["TRUSTED_PROXIES must be a list of networks such as '10.0.0.0/8'"]
    problems = []
    for entry in entries:
        try:
            parse_network(entry)
        except ValueError as e:
            problems.append(f"TRUSTED_PROXIES: {e}")
    return problems


def _forwarded_header_problems(value: Any) -> list[str]:
    names = [name.lower() for name in FORWARDED_HEADERS]
    if value is None or (isinstance(value, str) and value.strip().lower() in names):
        return []
    choices = " or ".join(repr(name) for name in FORWARDED_HEADERS)
    return [
        f"FORWARDED_HEADER must be {choices} (the one header your proxies write), or None "
        f"to read both; not {value!r}"
    ]


def _nat64_prefix_problems(entries: Any) -> list[str]:
    if not isinstance(entries, (list, tuple)):
        return [
            f"NAT64_PREFIXES must be a list of IPv6 prefixes such as {nat64.WELL_KNOWN_PREFIX!r}"
        ]
    problems = []
    for entry in entries:
        try:
            nat64.parse_prefix(entry)
        except ValueError as e:
            problems.append(f"NAT64_PREFIXES: {e}")
    return problems


def _cluster_node_problems(nodes: Any) -> list[str]:
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, str) for n in nodes):
        return ["CLUSTER_NODES must be a list of 'redis://host:port' strings"]
    problems = []
    for node in nodes:
        try:
            cluster.parse_node(node)
        except ValueError as e:
            problems.append(f"CLUSTER_NODES: {e}")
    return problems


@register(Tags.compatibility)
def check_mode(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """``MODE`` is one of :data:`ratelimits.engine.global_mode.MODES` (any other value enforces)."""
    value = user_settings().get("MODE", mode.ENFORCE)
    if isinstance(value, str) and value in mode.MODES:
        return []
    return [
        Error(
            f"RATELIMITS['MODE'] is {value!r}; it must be one of {', '.join(mode.MODES)}. "
            "Every policy is enforced until it is.",
            hint='"enforce" (the default), "shadow" (every policy counted, nothing denied) '
            'or "off" (nothing decided, no Redis call): see docs/settings.md.',
            id="ratelimits.E007",
        )
    ]


@register()
def check_throttled_view(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    path = user_settings().get("THROTTLED_VIEW")
    if path is None:
        return []
    problem = None
    if not isinstance(path, str) or not path:
        problem = "must be the dotted path of a view, such as 'myapp.views.throttled'"
    else:
        try:
            view = import_string(path)
        except ImportError as e:
            problem = f"cannot import {path!r} ({e})"
        else:
            if not callable(view):
                problem = f"{path!r} is not callable"
    if problem is None:
        return []
    return [
        Error(
            f"RATELIMITS['THROTTLED_VIEW'] {problem}.",
            hint="Name a view taking (request, exception), like CSRF_FAILURE_VIEW.",
            id="ratelimits.E006",
        )
    ]


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _imports_callable(path: object) -> bool:
    """True when ``path`` is a dotted path that imports a callable."""
    if not isinstance(path, str):
        return False
    try:
        return callable(import_string(path))
    except ImportError:
        return False
