"""The site after adoption: the same views, paths and names, each adopted one under
PolicyThrottle instead of its DRF throttles."""

from django.urls import path

from ratelimits.throttling import PolicyThrottle
from tests.adopt import views

ADOPTED = {"throttle_classes": [PolicyThrottle]}

urlpatterns = [
    path("api/shared/items/", views.Items.as_view(**ADOPTED), name="items"),
    path("api/shared/orders/", views.Orders.as_view(**ADOPTED), name="orders"),
    path("api/uploads/", views.Uploads.as_view(**ADOPTED), name="uploads-view"),
    path("api/reports/", views.Reports.as_view(**ADOPTED), name="reports"),
    path("api/burst/", views.Burst.as_view(**ADOPTED), name="burst"),
    path("api/custom/", views.Custom.as_view(), name="custom"),
    path("api/anonymous/", views.Anonymous.as_view(**ADOPTED), name="anonymous"),
    path("api/open/", views.Open.as_view(), name="open"),
]
