"""Admin registration for policies (list, add, edit with validation)."""

from __future__ import annotations

from django.contrib import admin

from ratelimits.models import Policy


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "endpoint",
        "methods_display",
        "algorithm",
        "rate",
        "key",
        "mode",
        "fail_open",
        "enabled",
    )
    list_filter = ("algorithm", "mode", "enabled", "fail_open")
    search_fields = ("name", "endpoint")
    readonly_fields = ("created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "enabled", "mode")}),
        ("What it matches", {"fields": ("endpoint", "methods")}),
        ("The limit", {"fields": ("algorithm", "limit", "window", "key", "fail_open")}),
        ("History", {"fields": ("created_at", "updated_at")}),
    )

    @admin.display(description="methods", ordering="methods")
    def methods_display(self, obj: Policy) -> str:
        return obj.methods or "all"

    @admin.display(description="limit")
    def rate(self, obj: Policy) -> str:
        return obj.rate_display
