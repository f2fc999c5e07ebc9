"""Prometheus metrics of the limiter, on prometheus-client's default ``REGISTRY``.

``ratelimits_decisions_total{policy, outcome}``
    Decisions per policy; ``outcome`` is one of :data:`ratelimits.engine.decision.ALL_OUTCOMES`
    (allowed, denied, shadow_denied, not_counted, failed_open, failed_closed), classified
    by :func:`ratelimits.engine.decision.outcome`. A request under three policies counts once in
    each.
``ratelimits_decision_seconds{source}``
    The limiter's own time per decided request (inside ``limiter.decide``), by ``source``:
    ``redis`` (a round trip happened), ``local`` (a remembered denial, no round trip) or
    ``fallback`` (Redis failed or its breaker was open: the fail mode answered).
``ratelimits_near_limit_total{policy}``
    Admitted requests that took a client's count under ``policy`` to
    ``RATELIMITS["NEAR_LIMIT"]`` of its limit (:mod:`ratelimits.engine.reporting.near_limit`): once
    per crossing, not per request above it.
``ratelimits_redis_evicted_keys_total{node}``, ``ratelimits_redis_maxmemory_bytes{node}``,
``ratelimits_redis_can_evict{node, maxmemory_policy}``
    Read from each primary of the counters' Redis on each scrape (``INFO``), never per
    request (:class:`RedisMemoryCollector`): the keys it evicted since it started (Redis's
    ``evicted_keys``: counters and lockouts among them, when it holds them), its
    ``maxmemory``, and 1 when it can evict (``maxmemory`` set, ``maxmemory-policy`` not
    ``noeviction``). No samples while it cannot be read.

The engine calls :func:`observe` once per decided request, with each decision's outcome
worked out once for it and the dashboard's counts (``AppConfig.ready()`` adds it as an
observer, :mod:`ratelimits.engine.reporting.observers`); read-only peeks are not counted.
:func:`metrics_view` serves the text exposition (``ratelimits.urls`` and
``ratelimits.urls.metrics`` mount it) to the clients whose ``REMOTE_ADDR`` is in
``RATELIMITS["METRICS_ALLOWED_NETWORKS"]`` (loopback and private networks by default), a
403 to others. A project that already serves ``/metrics`` gets these metrics there too.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from ratelimits.conf import app_settings
from ratelimits.exceptions import ConfigurationError, MissingExtra

__all__ = ["metrics_view"]

try:
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        REGISTRY,
        CollectorRegistry,
        Counter,
        Histogram,
        generate_latest,
        multiprocess,
    )
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
except ImportError as missing:
    raise MissingExtra("Prometheus metrics", "prometheus-client", "prometheus") from missing

from ratelimits.engine.decision import NEAR_LIMIT, Outcomes
from ratelimits.engine.reporting.observers import SOURCES
from ratelimits.engine.store import connection
from ratelimits.tools.diagnostics import eviction

#: Histogram buckets (seconds): a remembered denial takes tens of µs, a round trip to a
#: nearby Redis a few hundred µs; ``SOCKET_TIMEOUT`` (100 ms) bounds a failing call.
BUCKETS = (
    0.00002,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
)

_M = TypeVar("_M", Counter, Histogram)


def _once(name: str, make: type[_M], **kwargs: Any) -> _M:
    """The metric ``name`` already on ``REGISTRY`` (this module was reloaded), else a new
    one registered there. prometheus-client has no public lookup by name."""
    existing = REGISTRY._names_to_collectors.get(name)
    if existing is not None:
        return existing
    return make(name, **kwargs)


DECISIONS: Counter = _once(
    "ratelimits_decisions",
    Counter,
    documentation="Rate-limit decisions per policy and outcome.",
    labelnames=("policy", "outcome"),
)
NEAR_LIMITS: Counter = _once(
    "ratelimits_near_limit",
    Counter,
    documentation="Admitted requests that took a client's count to NEAR_LIMIT of its limit.",
    labelnames=("policy",),
)
DECISION_SECONDS: Histogram = _once(
    "ratelimits_decision_seconds",
    Histogram,
    documentation="Time the rate limiter took to decide a request, by where the answer came from.",
    labelnames=("source",),
    buckets=BUCKETS,
)

# Labelled children, so the request path does not call .labels() (a lock and a tuple
# build each time). Racing threads at worst both call .labels(), which returns one child.
# ``(policy, NEAR_LIMIT)`` maps to NEAR_LIMITS's child, any other pair to DECISIONS's.
_counters: dict[tuple[str, str], Any] = {}
_seconds: dict[str, Any] = {source: DECISION_SECONDS.labels(source=source) for source in SOURCES}


def observe(counted: Outcomes, seconds: float, source: str) -> None:
    """Count one decided request (the limiter's observer): each decision's outcome and
    the policies it took near their limits (``counted``, see
    :func:`ratelimits.engine.decision.outcomes`), and ``seconds`` the limiter took, under
    ``source`` (one of :data:`SOURCES`)."""
    if not counted:
        return
    for key in counted:
        child = _counters.get(key)
        if child is None:
            child = _counters[key] = _child(*key)
        child.inc()
    _seconds[source].observe(seconds)


def _child(policy: str, what: str) -> Any:
    """The counter child a ``(policy, outcome)`` pair of :func:`observe` counts in."""
    if what == NEAR_LIMIT:
        return NEAR_LIMITS.labels(policy=policy)
    return DECISIONS.labels(policy=policy, outcome=what)


class RedisMemoryCollector:
    """The counters' Redis's evictions and memory settings, read from each primary when
    scraped (one ``INFO memory`` and one ``INFO stats`` each, through the tools' client)."""

    def describe(self) -> list[Any]:
        # The names only: registering must not connect to Redis.
        return self._families()

    def collect(self) -> list[Any]:
        evicted, maxmemory, can_evict = families = self._families()
        try:
            found = eviction.read(connection.get_tool_client())
        except (*connection.REDIS_ERRORS, ConfigurationError, OSError):
            return families  # unreadable: no samples (the absence is what to alert on)
        for memory in found:
            if memory.evicted_keys is not None:
                evicted.add_metric([memory.node], memory.evicted_keys)
            maxmemory.add_metric([memory.node], memory.maxmemory)
            can_evict.add_metric([memory.node, memory.policy], int(memory.can_evict))
        return families

    @staticmethod
    def _families() -> list[Any]:
        return [
            CounterMetricFamily(
                "ratelimits_redis_evicted_keys",
                "Keys the counters' Redis evicted since it started (INFO stats evicted_keys).",
                labels=["node"],
            ),
            GaugeMetricFamily(
                "ratelimits_redis_maxmemory_bytes",
                "maxmemory of the counters' Redis (0: no limit).",
                labels=["node"],
            ),
            GaugeMetricFamily(
                "ratelimits_redis_can_evict",
                "1 when the counters' Redis deletes keys once full (maxmemory set and "
                "maxmemory-policy not noeviction): limits reset, lockouts lift.",
                labels=["node", "maxmemory_policy"],
            ),
        ]


def _memory_collector() -> RedisMemoryCollector:
    """The collector already on ``REGISTRY`` (this module was reloaded), else a new one
    registered there."""
    existing = REGISTRY._names_to_collectors.get("ratelimits_redis_can_evict")
    if isinstance(existing, RedisMemoryCollector):
        return existing
    if existing is not None:  # the previous load's class: replaced by this one's
        REGISTRY.unregister(existing)
    collector = RedisMemoryCollector()
    REGISTRY.register(collector)
    return collector


REDIS_MEMORY = _memory_collector()


def _registry() -> Any:
    """What to expose: the default registry, or under ``PROMETHEUS_MULTIPROC_DIR`` (gunicorn
    and other pre-fork servers) every worker's values, merged from that directory, and the
    Redis memory read now."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(REDIS_MEMORY)
    return registry


def scraper_allowed(remote_addr: object) -> bool:
    """True when ``remote_addr`` (the request's ``REMOTE_ADDR``: the peer of the
    connection, never a header a client can write) is in
    ``RATELIMITS["METRICS_ALLOWED_NETWORKS"]``. A bad entry allows nothing (E002 names
    it)."""
    try:
        address = ipaddress.ip_address(str(remote_addr or "").strip())
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for entry in app_settings.METRICS_ALLOWED_NETWORKS or ():
        try:
            network = ipaddress.ip_network(str(entry).strip(), strict=False)
        except ValueError:
            continue
        if address.version == network.version and address in network:
            return True
    return False


@csrf_exempt  # only GET and HEAD get through: anything else is a 405, not a CSRF 403
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text exposition of the process's (or every worker's) metrics, for a
    scraper in ``METRICS_ALLOWED_NETWORKS``; a 403 for anyone else."""
    if not scraper_allowed(request.META.get("REMOTE_ADDR")):
        return HttpResponse(
            "The metrics are served only to RATELIMITS['METRICS_ALLOWED_NETWORKS'].\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
