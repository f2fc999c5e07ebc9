"""A plain view carrying a django-ratelimit spec, as the decorator of
``ratelimits.contrib.django_ratelimit`` leaves one (a stand-in spec)."""

from typing import Any

from django.http import HttpResponse
from django.urls import path


def legacy(request: Any) -> HttpResponse:
    return HttpResponse("ok")


legacy.django_ratelimit_spec = "legacy-spec"  # type: ignore[attr-defined]

urlpatterns = [path("legacy/", legacy, name="legacy")]
