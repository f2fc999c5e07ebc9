from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView

from project.ninja_api import api as ninja_api

urlpatterns = [
    path("", TemplateView.as_view(template_name="demo/index.html"), name="home"),
    path("admin/", admin.site.urls),
    path("api/", include("project.api.urls")),
    path("ninja/", ninja_api.urls),
    path("ratelimits/", include("ratelimits.urls")),
    path("", include("project.pages.urls")),
]
