"""The usage view and the metrics mounted apart, as docs/prometheus.md shows: the public
URLconf has the usage view only, the metrics sit under an internal path."""

from django.urls import include, path

urlpatterns = [
    path("ratelimits/", include("ratelimits.urls.usage")),
    path("internal/", include("ratelimits.urls.metrics")),
    path("api/", include("project.api.urls")),
]
