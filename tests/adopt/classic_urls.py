"""DRF's classic site: DEFAULT_THROTTLE_CLASSES = [AnonRateThrottle, UserRateThrottle] on
two views sharing both counters, a view under the user throttle alone, an unthrottled one
outside /api/ (the middleware puts every view under the policies)."""

from django.urls import path

from tests.adopt import views

urlpatterns = [
    path("api/shared/items/", views.Items.as_view(), name="items"),
    path("api/shared/orders/", views.Orders.as_view(), name="orders"),
    path("api/profile/", views.Profile.as_view(), name="profile"),
    path("open/", views.Open.as_view(), name="open"),
]
