from django.urls import path

from project.pages import views

urlpatterns = [
    # Django's own login view, under the "signin" policy (POST, 5 failed sign-ins a minute
    # per IP, then locked out for 15 minutes).
    path("accounts/login/", views.SignInView.as_view(), name="login"),
    path("hello/", views.hello, name="hello"),
]
