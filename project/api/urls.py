from django.urls import path

from project.api import views

app_name = "api"

urlpatterns = [
    path("search/", views.SearchView.as_view(), name="search"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("payment/", views.PaymentView.as_view(), name="payment"),
    path("items/", views.ItemsView.as_view(), name="items"),
    path("report/", views.ReportView.as_view(), name="report"),
    path("drf-anon/", views.DrfAnonView.as_view(), name="drf-anon"),
]
