"""URLs of the app: ``path("ratelimits/", include("ratelimits.urls"))`` serves
``ratelimits/metrics/`` (Prometheus)."""

from django.urls import path

from ratelimits.prometheus import metrics_view

app_name = "ratelimits"

urlpatterns = [path("metrics/", metrics_view, name="metrics")]
