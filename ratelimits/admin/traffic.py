"""The change page's Traffic panel: a policy's traffic record over the last hour, day or
week (:mod:`ratelimits.tools.traffic`) as a chart and a table, what a typed limit would
have denied, the suggested limit; and "Try it in shadow", which puts a limit to the test
without enforcing it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils.safestring import SafeString

from ratelimits.admin.traffic_chart import render_levels
from ratelimits.choices import Mode
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.models import Policy
from ratelimits.tools.traffic import SPANS, traffic_report
from ratelimits.tools.traffic.estimate import HEADROOM, SUGGESTION_SHARE

#: The GET parameters of the panel's form.
SINCE_PARAM, WHAT_IF_PARAM = "traffic_since", "what_if"
#: The suffix of the shadow policy an enforcing one tries a limit in.
SHADOW_SUFFIX = "-shadow"


@dataclass(frozen=True)
class TrafficPanel:
    """What the panel shows; ``error`` instead when it cannot (Redis, a bad what-if)."""

    since: str
    spans: tuple[str, ...] = tuple(SPANS)
    report: dict[str, Any] = field(default_factory=dict)
    chart: SafeString | None = None
    what_if_text: str = ""
    error: str = ""
    what_if_error: str = ""
    headroom: float = HEADROOM
    share: int = round(SUGGESTION_SHARE * 100)

    @property
    def share_denied(self) -> float | None:
        """The share of the requests the what-if limit would have denied, about."""
        what_if = self.report.get("what_if")
        requests = self.report.get("requests")
        if not what_if or not requests:
            return None
        return 100.0 * what_if["requests_denied"] / requests


def traffic_panel(row: Policy, params: dict[str, str]) -> TrafficPanel:
    """The panel of the stored policy ``row`` for the page's GET ``params``."""
    since = params.get(SINCE_PARAM) or "24h"
    if since not in SPANS:
        since = "24h"
    text = (params.get(WHAT_IF_PARAM) or "").strip()
    what_if, what_if_error = None, ""
    if text:
        try:
            what_if = int(text)
            if what_if < 1:
                raise ValueError
        except ValueError:
            what_if_error = f"“{text}” is not a limit: type a whole number, 1 or more."
            what_if = None
    try:
        policy = CompiledPolicy.from_model(row)
    except ValueError as e:
        return TrafficPanel(since, error=f"This policy does not compile here: {e}")
    try:
        client = connection.get_tool_client()
        report = traffic_report(client, policy, since, what_if)
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        return TrafficPanel(since, error=f"Redis {errors.what_went_wrong(e)}: {e}")
    shown = report["what_if"]["limit"] if report["what_if"] else None
    chart = render_levels(policy.name, report["levels"], report["limit"], shown)
    return TrafficPanel(
        since, report=report, chart=chart, what_if_text=text, what_if_error=what_if_error
    )


def try_in_shadow(row: Policy, limit: int) -> tuple[Policy, bool]:
    """Put ``limit`` to the test without enforcing it: a shadow policy takes it, and
    ``(that policy, created)`` is returned. A shadow ``row`` takes it itself; an enforcing
    one keeps its limit, and its shadow twin (``<name>-shadow``: the same fields, in
    shadow mode) is made or updated with ``limit``."""
    if limit < 1:
        raise ValueError(f"a limit is at least 1, not {limit}")
    with transaction.atomic():
        if row.mode == Mode.SHADOW:
            row.limit = limit
            row.full_clean()
            row.save()
            return row, False
        name = row.name[: 64 - len(SHADOW_SUFFIX)] + SHADOW_SUFFIX
        twin = Policy.objects.filter(name=name).first()
        created = twin is None
        if twin is None:
            twin = Policy(name=name)
        for model_field in Policy._meta.concrete_fields:
            if model_field.name not in ("id", "name", "created_at", "updated_at"):
                setattr(twin, model_field.attname, getattr(row, model_field.attname))
        twin.mode = Mode.SHADOW
        twin.limit = limit
        twin.full_clean()
        twin.save()
        return twin, created
