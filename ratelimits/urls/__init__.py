"""URLs of the app. ``path("ratelimits/", include("ratelimits.urls"))`` serves both:

- ``ratelimits/usage/``: the caller's own usage (:mod:`ratelimits.usage`; URL name
  ``ratelimits:usage``, which a policy's endpoint may name), for the public;
- ``ratelimits/metrics/``: Prometheus (with the ``prometheus`` extra; URL name
  ``ratelimits:metrics``), for the scraper: answered only to ``REMOTE_ADDR`` in
  ``RATELIMITS["METRICS_ALLOWED_NETWORKS"]`` (loopback and private networks by default).

To mount them apart (the metrics on an internal host or port, or under a path the public
proxy does not forward), include :mod:`ratelimits.urls.usage` (namespace ``ratelimits``)
and :mod:`ratelimits.urls.metrics` (namespace ``ratelimits_metrics``) instead.
"""

from django.urls import path

from ratelimits.urls.metrics import metrics_view
from ratelimits.usage import usage_view

app_name = "ratelimits"

urlpatterns = [
    path("metrics/", metrics_view, name="metrics"),
    path("usage/", usage_view, name="usage"),
]
