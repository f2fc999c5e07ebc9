"""The Prometheus metrics alone, to mount apart from the public usage view, e.g. in an
internal URLconf or under a path the public proxy does not forward:
``path("internal/", include("ratelimits.urls.metrics"))`` serves ``internal/metrics/``
(URL name ``ratelimits_metrics:metrics``). The view answers only clients whose
``REMOTE_ADDR`` is in ``RATELIMITS["METRICS_ALLOWED_NETWORKS"]``, wherever it is mounted.
Without prometheus-client it answers 501, naming the extra to install."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from ratelimits.exceptions import MissingExtra

try:
    from ratelimits.prometheus import metrics_view
except MissingExtra as missing:
    _missing = str(missing)

    def metrics_view(request: HttpRequest) -> HttpResponse:
        """Without prometheus-client: a 501 that names the extra to install."""
        return HttpResponse(_missing, status=501, content_type="text/plain; charset=utf-8")


app_name = "ratelimits_metrics"

urlpatterns = [path("metrics/", metrics_view, name="metrics")]
