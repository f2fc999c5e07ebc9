"""URLs of the app: ``path("ratelimits/", include("ratelimits.urls"))`` serves
``ratelimits/metrics/`` (Prometheus, with the ``prometheus`` extra) and
``ratelimits/usage/`` (the caller's own usage, :mod:`ratelimits.usage`; URL name
``ratelimits:usage``, which a policy's endpoint may name)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from ratelimits.exceptions import MissingExtra
from ratelimits.usage import usage_view

try:
    from ratelimits.prometheus import metrics_view
except MissingExtra as missing:
    _missing = str(missing)

    def metrics_view(request: HttpRequest) -> HttpResponse:
        """Without prometheus-client: a 501 that names the extra to install."""
        return HttpResponse(_missing, status=501, content_type="text/plain; charset=utf-8")


app_name = "ratelimits"

urlpatterns = [
    path("metrics/", metrics_view, name="metrics"),
    path("usage/", usage_view, name="usage"),
]
