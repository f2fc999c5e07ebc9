"""Form pieces for the policy admin: endpoint suggestions and the memory estimate."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ratelimits.engine import algorithms
from ratelimits.engine.policy.describe import describe_duration
from ratelimits.tools import memory
from ratelimits.tools.endpoints import suggestions

DATALIST_ID = "ratelimits-endpoint-suggestions"


class EndpointInput(forms.TextInput):
    """A text input with the project's URL names and scopes as suggestions."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"list": DATALIST_ID, "autocomplete": "off", "size": 40, **(attrs or {})})

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        field = super().render(name, value, attrs, renderer)
        options = format_html_join(
            "", '<option value="{}">{}</option>', ((s.value, s.label) for s in suggestions())
        )
        return format_html('{}<datalist id="{}">{}</datalist>', field, DATALIST_ID, options)


def memory_estimate(
    algorithm: str, limit: int | None, calendar: str = "", lockout: int = 0
) -> SafeString:
    """The estimate as HTML; ``policy_form.js`` recomputes it as the form changes."""
    points = json.dumps(
        {
            "sizes": {
                name: getattr(memory.REFERENCE, figure) for name, figure in memory.FIGURES.items()
            },
            "logs": memory.LOG_POINTS,
            "released": algorithms.RELEASED,
            "counter": memory.COUNTER_BYTES,
            "large": memory.LARGE_BYTES,
            "lock": memory.LOCK_BYTES,
            "kept": memory.PERIOD_KEPT,
            "work": memory.WORK,
            "largeWork": memory.LARGE_WORK_LIMIT,
        }
    )
    return format_html(
        '<div id="ratelimits-memory" data-points="{}">{}</div>'
        '<p class="help ratelimits-memory-measured">{}</p>',
        points,
        memory_text(algorithm, limit, calendar, lockout),
        measured_on(),
    )


def measured_on() -> str:
    """Which server the figures were measured on, and how the others differ."""
    logs = ", ".join(
        f"{m.label}: {memory.human(memory.bytes_per_client('sliding_log', 1000, m))}"
        for m in memory.MEASURED
    )
    return (
        f"Measured on {memory.REFERENCE.label}; other servers and allocators differ "
        f"(a sliding_log at 1000 on {logs})."
    )


def memory_text(
    algorithm: str, limit: int | None, calendar: str = "", lockout: int = 0
) -> SafeString:
    if not limit:
        return format_html("{}", "Set a limit to see the estimate.")
    size = memory.bytes_per_client(algorithm, limit)
    if algorithms.released(algorithm):
        at = "in progress at once"
    elif calendar in memory.PERIOD_KEPT:
        at = f"per calendar {calendar}"
    else:
        at = "per window"
    text = format_html(
        "About <strong>{}</strong> of Redis memory per active client ({} at {} {}).",
        memory.human(size),
        algorithm,
        limit,
        at,
    )
    if calendar in memory.PERIOD_KEPT:
        text = format_html(
            "{} A count is kept until its calendar {} ends (up to {}): every client seen in "
            "the {} is an active client.",
            text,
            calendar,
            memory.PERIOD_KEPT[calendar],
            calendar,
        )
    if lockout and lockout > 0:
        text = format_html(
            "{} A locked-out client adds about <strong>{}</strong> for its lock, kept {}.",
            text,
            memory.human(memory.LOCK_BYTES),
            describe_duration(lockout),
        )
    if memory.is_large(algorithm, limit):
        text = format_html(
            '{}<p class="errornote ratelimits-memory-warning">{}</p>',
            text,
            large_log_advice(algorithm, limit),
        )
    return format_html("{}{}", text, work_text(algorithm, limit))


def work_text(algorithm: str, limit: int) -> SafeString:
    """Redis work per request (``policy_form.js`` says the same): its order and what it is,
    never growing with a request's cost; a warning for a log at a very large limit."""
    order, what, large = memory.work_per_request(algorithm, limit)
    text = format_html(
        '<p class="ratelimits-work">Redis work per request: <strong>{}</strong> ({}), '
        "whatever the request's cost.</p>",
        order,
        what,
    )
    if large:
        text = format_html(
            '{}<p class="errornote ratelimits-work-warning">{}</p>', text, large_work_advice(limit)
        )
    return text


def large_work_advice(limit: int) -> str:
    """The warning for a log at a very large limit (``policy_form.js`` says the same)."""
    return (
        f"A log of up to {limit} entries: a denied request searches it (about "
        f"{max(1, limit.bit_length())} steps), and giving back a request (counts other than "
        "all) renumbers the entries admitted during its response. sliding_counter does O(1) "
        "work at any limit."
    )


def large_log_advice(algorithm: str, limit: int) -> str:
    """What to use instead of a log that large (``policy_form.js`` says the same)."""
    counter = memory.human(memory.COUNTER_BYTES)
    smaller = [
        log
        for log in memory.LOG_POINTS
        if log != algorithm
        and not memory.is_large(log, limit)
        and memory.bytes_per_client(log, limit) < memory.bytes_per_client(algorithm, limit)
    ]
    if smaller:
        size = memory.human(memory.bytes_per_client(smaller[0], limit))
        return (
            f"A log this long is large: consider {smaller[0]} (exact too, about "
            f"{size}) or sliding_counter (about {counter}, approximate)."
        )
    return (
        f"A log this long is large: consider sliding_counter (about {counter} at any "
        f"limit, approximate)."
    )
