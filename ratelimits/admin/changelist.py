"""The policy changelist's extra filter and columns: the kind of key, an endpoint that
matches nothing, the denials of the last few minutes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.templatetags.static import static
from django.utils.html import format_html

from ratelimits.engine.keys.kinds import KEY_KINDS, PAIR
from ratelimits.engine.store import connection
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Policy
from ratelimits.tools.endpoints import EndpointIndex
from ratelimits.tools.stats_reading import denied_since
from ratelimits.validators import HEADER_PREFIX

DENIED_WINDOW_MINUTES = 5
#: The key filter's choice for policies keyed by a pair of kinds (``username+ip``).
PAIRS = "pair"


class KeyKindFilter(admin.SimpleListFilter):
    """Who a policy counts: each kind of the key-kind registry, or a pair of them."""

    title = "key"
    parameter_name = "key_kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind.name, kind.label) for kind in KEY_KINDS.values()] + [(PAIRS, "a pair")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Policy]) -> QuerySet[Policy]:
        value = self.value()
        if value == "header":
            return queryset.filter(key__startswith=HEADER_PREFIX)
        if value == PAIRS:
            return queryset.filter(key__contains=PAIR).exclude(key__startswith=HEADER_PREFIX)
        if value:
            return queryset.filter(key=value)
        return queryset


def endpoint_column(urlconf: str | None) -> Callable[[Policy], Any]:
    """The endpoint column, with a warning icon on an endpoint that matches no URL name,
    scope or path; the URLconf is read once per page."""
    index = EndpointIndex(urlconf)

    @admin.display(description="endpoint", ordering="endpoint")
    def endpoint(obj: Policy) -> Any:
        problem = index.problem(obj.endpoint)
        if problem is None:
            return obj.endpoint
        return format_html(
            '{} <img src="{}" alt="{}" title="{}" class="ratelimits-unmatched">',
            obj.endpoint,
            static("admin/img/icon-alert.svg"),
            "(matches nothing)",
            f"This endpoint {problem}: the policy limits nothing.",
        )

    return endpoint


def denied_column() -> Callable[[Policy], Any]:
    """A changelist column with each policy's denials in the last few minutes, read from
    Redis once per page."""
    counts: dict[str, int] | None
    try:
        counts = denied_since(DENIED_WINDOW_MINUTES)
    except (*connection.REDIS_ERRORS, ConfigurationError):
        counts = None

    @admin.display(description=f"denied ({DENIED_WINDOW_MINUTES} min)")
    def denied(obj: Policy) -> Any:
        if counts is None:
            return format_html('<span title="{}">?</span>', "Redis did not answer")
        return counts.get(obj.name, 0)

    return denied
