from django.contrib.auth.views import LoginView
from django.urls import path

from project.pages import views

urlpatterns = [
    # Django's own login view, under the "signin" policy (POST, 5 per minute per IP).
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("hello/", views.hello, name="hello"),
]
