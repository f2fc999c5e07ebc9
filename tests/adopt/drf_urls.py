"""The site before adoption: the views under DRF's throttles."""

from django.urls import path

from tests.adopt import views

urlpatterns = [
    path("api/shared/items/", views.Items.as_view(), name="items"),
    path("api/shared/orders/", views.Orders.as_view(), name="orders"),
    path("api/uploads/", views.Uploads.as_view(), name="uploads-view"),
    path("api/reports/", views.Reports.as_view(), name="reports"),
    path("api/burst/", views.Burst.as_view(), name="burst"),
    path("api/custom/", views.Custom.as_view(), name="custom"),
    path("api/anonymous/", views.Anonymous.as_view(), name="anonymous"),
    path("api/open/", views.Open.as_view(), name="open"),
]
