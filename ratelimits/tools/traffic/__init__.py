"""A policy's traffic, read and estimated for the tools (the admin's Traffic panel and
``manage.py ratelimits traffic``): :mod:`~.estimate` (what another limit would have
denied, the suggested limit) and :mod:`~.report` (the figures both show)."""

from ratelimits.tools.traffic.report import SPANS, parse_since, traffic_report

__all__ = ["SPANS", "parse_since", "traffic_report"]
