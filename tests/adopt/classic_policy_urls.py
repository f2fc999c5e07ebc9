"""DRF's classic site after adoption: the defaults are PolicyThrottle, and the view with
its own user throttle has PolicyThrottle instead."""

from django.urls import path

from tests.adopt import views
from tests.adopt.policy_urls import ADOPTED

urlpatterns = [
    path("api/shared/items/", views.Items.as_view(), name="items"),
    path("api/shared/orders/", views.Orders.as_view(), name="orders"),
    path("api/profile/", views.Profile.as_view(**ADOPTED), name="profile"),
    path("open/", views.Open.as_view(), name="open"),
]
