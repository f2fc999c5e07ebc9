"""The admin dashboard: allowed, denied and shadow-denied requests per policy per minute
over the last hour, with the allowed ones that took a client near its limit, as
server-rendered SVG (no JavaScript, no CDN), and under each chart the clients nearest
their limits now, each under the limit that applies to it (its override's, when one
does). Above them, each primary of the counters' Redis: the keys it evicted, its
``maxmemory`` and ``maxmemory-policy``, and a warning when it can evict the counters. A
``RATELIMITS["MODE"]`` other than ``"enforce"`` is said first."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from ratelimits.admin.chart import render_svg
from ratelimits.admin.live_usage import NearestLimits, nearest_limits
from ratelimits.conf import app_settings
from ratelimits.engine import global_mode as mode
from ratelimits.engine.decision import NEAR_LIMIT
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Dashboard, Policy
from ratelimits.tools import stats_reading
from ratelimits.tools.diagnostics import eviction

MINUTES = 60


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    """Listed in the admin index; who may view policies may view the dashboard."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return user.has_perm("ratelimits.view_policy") or user.has_perm("ratelimits.change_policy")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        from django.urls import path

        view = self.admin_site.admin_view(self.changelist_view)
        info = self.opts.app_label, self.opts.model_name
        return [path("", view, name="{}_{}_changelist".format(*info))]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        names = list(Policy.objects.order_by("name").values_list("name", flat=True))
        charts: list[dict[str, Any]] = []
        clients: NearestLimits | None = None
        error = ""
        memory: list[eviction.Memory] = []
        try:
            series = stats_reading.series(names, minutes=MINUTES)
        except (*connection.REDIS_ERRORS, ConfigurationError) as e:
            error = f"Redis {errors.what_went_wrong(e)}: {e}"
        else:
            memory = _memory()
            clients = nearest_limits()
            for name in series.policies:
                charts.append(
                    {
                        "policy": name,
                        "svg": render_svg(series, name),
                        "totals": {
                            what: series.total(name, what) for what in stats_reading.OUTCOMES
                        },
                        "near_limit": series.total(name, NEAR_LIMIT),
                        "clients": clients.by_policy.get(name, []),
                    }
                )
        context = {
            **self.admin_site.each_context(request),
            "title": "Rate-limit dashboard",
            "subtitle": f"Requests per policy per minute, last {MINUTES} minutes",
            "opts": self.opts,
            "charts": charts,
            "clients": clients,
            "error": error,
            "memory": memory,
            "flush_interval": app_settings.METRICS_FLUSH_INTERVAL,
            "near_percent": _percent(app_settings.NEAR_LIMIT),
            "mode": mode.current(),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/ratelimits/dashboard.html", context)


def _memory() -> list[eviction.Memory]:
    """Each primary's memory settings and evictions; none when they cannot be read (an
    ACL user refused INFO and CONFIG: the page goes on without them)."""
    try:
        return eviction.read(connection.get_tool_client())
    except (*connection.REDIS_ERRORS, ConfigurationError, OSError):
        return []


def _percent(fraction: object) -> str:
    """``NEAR_LIMIT`` as the page says it: ``"80%"``, ``"12.5%"``."""
    try:
        return f"{float(fraction) * 100:g}%"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(fraction)
