"""The usage view alone: ``path("ratelimits/", include("ratelimits.urls.usage"))`` serves
``ratelimits/usage/`` (URL name ``ratelimits:usage``, which a policy's endpoint may name),
without the Prometheus metrics (see :mod:`ratelimits.urls.metrics`)."""

from django.urls import path

from ratelimits.usage import usage_view

app_name = "ratelimits"

urlpatterns = [path("usage/", usage_view, name="usage")]
