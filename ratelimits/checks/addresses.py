"""Checks of whom a client address is believed from: ``TRUSTED_PROXIES``,
``NUM_PROXIES``, ``FORWARDED_HEADER`` and the exempt networks behind them (W010-W013)."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.core.checks import Tags, Warning, register

from ratelimits.checks.settings import _is_integer
from ratelimits.conf import DEFAULTS, user_settings
from ratelimits.http.proxies import parse_network


@register(Tags.security)
def check_proxies(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """W010: a ``TRUSTED_PROXIES`` entry that trusts more than it likely means; W011: an
    ``EXEMPT_NETWORKS`` address a client can claim in a header (``NUM_PROXIES`` believes
    every sender); W012: ``NUM_PROXIES`` ignored beside ``TRUSTED_PROXIES``; W013:
    ``FORWARDED_HEADER`` ignored without ``TRUSTED_PROXIES``."""
    value = {**DEFAULTS, **user_settings()}
    trusted, proxies = value["TRUSTED_PROXIES"], value["NUM_PROXIES"]
    found: list[Any] = []
    for entry in trusted if isinstance(trusted, (list, tuple)) else ():
        try:
            network = parse_network(entry)
        except ValueError:
            continue  # E002
        problem = None
        if network.prefixlen == 0:
            problem = "trusts every address: any client can write its own address"
        elif _has_host_bits(entry):
            problem = f"has host bits set: it trusts all of {network}"
        if problem:
            found.append(
                Warning(
                    f"RATELIMITS['TRUSTED_PROXIES'] entry {entry!r} {problem}.",
                    hint="List only the networks your proxies send from (their addresses, "
                    "or their subnet such as '10.0.0.0/24').",
                    id="ratelimits.W010",
                )
            )
    has_trusted = isinstance(trusted, (list, tuple)) and bool(trusted)
    if not has_trusted and _is_integer(proxies) and proxies > 0 and value["EXEMPT_NETWORKS"]:
        found.append(
            Warning(
                "RATELIMITS['EXEMPT_NETWORKS'] is set and NUM_PROXIES believes "
                "X-Forwarded-For from any sender: a client that reaches the site without "
                "passing the proxies can write an exempt address in the header.",
                hint="Set RATELIMITS['TRUSTED_PROXIES'] to your proxies' networks instead "
                "of NUM_PROXIES: the header is then read only from them.",
                id="ratelimits.W011",
            )
        )
    if has_trusted and _is_integer(proxies) and proxies > 0:
        found.append(
            Warning(
                "RATELIMITS sets both TRUSTED_PROXIES and NUM_PROXIES; NUM_PROXIES is ignored.",
                hint="Remove NUM_PROXIES: TRUSTED_PROXIES decides whose forwarding headers "
                "are read, and how far.",
                id="ratelimits.W012",
            )
        )
    if not has_trusted and value["FORWARDED_HEADER"] is not None:
        found.append(
            Warning(
                "RATELIMITS['FORWARDED_HEADER'] is set without TRUSTED_PROXIES; it is "
                "ignored (NUM_PROXIES reads X-Forwarded-For, and with neither no "
                "forwarding header is read).",
                hint="Set RATELIMITS['TRUSTED_PROXIES'] to your proxies' networks: the "
                "header FORWARDED_HEADER names is then read from them.",
                id="ratelimits.W013",
            )
        )
    return found


def _has_host_bits(entry: str) -> bool:
    """True for a network written with host bits ("10.0.0.1/8"), which parses leniently."""
    try:
        ipaddress.ip_network(entry.strip())
    except ValueError:
        return True
    return False
