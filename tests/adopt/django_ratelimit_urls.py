"""Views under ``ratelimits.contrib.django_ratelimit.ratelimit``: two function views of one
``group`` (one counter), and a class-based view whose ``post`` carries its own."""

from typing import Any

from django.http import HttpResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django.views import View

from ratelimits.contrib.django_ratelimit import ratelimit


@ratelimit(group="search", key="ip", rate="10/m", block=True)
def search(request: Any) -> HttpResponse:
    return HttpResponse("search")


@ratelimit(group="search", key="ip", rate="10/m", block=True)
def search_more(request: Any) -> HttpResponse:
    return HttpResponse("more")


class Signup(View):
    @method_decorator(ratelimit(key="ip", rate="5/h", method="POST"))
    def post(self, request: Any) -> HttpResponse:
        return HttpResponse("signed up")


urlpatterns = [
    path("search/", search, name="search"),
    path("search/more/", search_more, name="search-more"),
    path("signup/", Signup.as_view(), name="signup"),
]
