"""The demo site's URLs, and the soak's own views under ``/soak/`` (namespace ``soak``)."""

from django.urls import include, path

from soak import views

soak_patterns = [
    path("ping/", views.ping, name="ping"),
    path("plain/", views.plain, name="plain"),
    path("quota/", views.quota, name="quota"),
]

urlpatterns = [
    path("soak/", include((soak_patterns, "soak"))),
    path("", include("project.urls")),
]
