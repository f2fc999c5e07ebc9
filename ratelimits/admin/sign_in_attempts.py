"""The sign-in audit trail in the admin: the attempts, read-only, filtered by result, date
and policy, searched by username and address; exported as CSV (view permission); and the
operator's reset of an address or a username across every policy, lifting its locks (the
policies' ``reset`` permission), as ``manage.py ratelimits reset --identity`` does."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone

from ratelimits.admin.actions import lifting as lifted_note
from ratelimits.admin.policy import RESET_PERMISSION
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import SignInAttempt
from ratelimits.tools import lifting

#: The CSV's columns, in order.
CSV_FIELDS = ("when", "result", "username", "address", "user_agent", "path", "policy")
#: A spreadsheet reads a cell starting with one of these as a formula: such text (a
#: username an attacker typed) is written with a leading apostrophe.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class _Echo:
    """A file-like object whose ``write`` returns what it was given (for streaming)."""

    def write(self, value: str) -> str:
        return value


def csv_cell(value: Any) -> str:
    """``value`` as a CSV cell no spreadsheet runs as a formula."""
    text = "" if value is None else str(value)
    return f"'{text}" if text.startswith(_FORMULA_START) else text


@admin.action(description="Export the selected attempts as CSV", permissions=["view"])
def export_csv(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SignInAttempt]
) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())

    def rows() -> Iterator[str]:
        yield writer.writerow(CSV_FIELDS)
        for attempt in queryset.order_by("-when", "-pk").iterator(chunk_size=2000):
            values = [getattr(attempt, name) for name in CSV_FIELDS]
            values[0] = attempt.when.isoformat()
            yield writer.writerow([csv_cell(v) for v in values])

    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="sign-in-attempts-{stamp}.csv"'
    return response


@admin.action(
    description="Lift every lock of these addresses (reset them in every policy)",
    permissions=["lift"],
)
def lift_addresses(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SignInAttempt]
) -> None:
    addresses = sorted({a for a in queryset.values_list("address", flat=True) if a})
    _lift(modeladmin, request, queryset, [f"ip:{address}" for address in addresses])


@admin.action(
    description="Lift every lock of these usernames (reset them in every policy)",
    permissions=["lift"],
)
def lift_usernames(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SignInAttempt]
) -> None:
    usernames = sorted({u for u in queryset.values_list("username", flat=True) if u.strip()})
    _lift(modeladmin, request, queryset, [f"username:{username}" for username in usernames])


def _lift(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[SignInAttempt],
    asked: list[str],
) -> None:
    """Reset each of ``asked`` in every policy; one message for all, one history entry
    (on a selected attempt) per client reset."""
    deleted = locks = 0
    first = queryset.first()
    try:
        client = connection.get_tool_client()
        for text in asked:
            found = lifting.find(client, text)
            if not found.names:
                continue
            deleted += lifting.lift(client, found, type(modeladmin), by=request.user)
            locks += len(found.locks)
            if first is not None:
                modeladmin.log_change(
                    request,
                    first,
                    f"Reset {text} in {', '.join(found.policies)} "
                    f"({len(found.names)} keys{lifted_note(len(found.locks))}).",
                )
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        modeladmin.message_user(
            request, f"Redis {errors.what_went_wrong(e)}; not all reset ({e}).", messages.ERROR
        )
        return
    except ValueError as e:
        modeladmin.message_user(request, str(e), messages.ERROR)
        return
    who = ", ".join(asked) or "nobody"
    modeladmin.message_user(
        request, f"Reset {who}: {deleted} keys deleted{lifted_note(locks)}.", messages.SUCCESS
    )


@admin.register(SignInAttempt)
class SignInAttemptAdmin(admin.ModelAdmin):
    """The sign-in attempts, newest first; nothing can be added or edited here."""

    list_display = ("when", "result", "username", "address", "path", "policy", "user_agent")
    list_filter = ("result", ("when", admin.DateFieldListFilter), "policy")
    search_fields = ("username", "address")
    date_hierarchy = "when"
    actions = (export_csv, lift_addresses, lift_usernames)
    list_per_page = 100
    show_full_result_count = False  # no second COUNT(*) over a long trail

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_lift_permission(self, request: HttpRequest) -> bool:
        """The policies' ``reset`` permission, which the lift actions ask for."""
        return request.user.has_perm(RESET_PERMISSION)
