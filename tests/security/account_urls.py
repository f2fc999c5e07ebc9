"""A site's account views beside the sign-in backend, for
``tests/security/test_login_beside_the_backend.py``: Django's ``LoginView``,
``PasswordResetConfirmView`` with ``post_reset_login``, and a sign-up view that calls
``login(request, user)`` without ``backend=``, as most do."""

from __future__ import annotations

from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView, PasswordResetConfirmView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path


def sign_up(request: HttpRequest) -> HttpResponse:
    form = UserCreationForm(request.POST)
    if not form.is_valid():
        return HttpResponse(form.errors.as_json(), status=400)
    login(request, form.save())
    return HttpResponseRedirect("/")


urlpatterns = [
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/sign-up/", sign_up, name="sign-up"),
    path(
        "accounts/reset/<uidb64>/<token>/",
        PasswordResetConfirmView.as_view(post_reset_login=True, success_url="/done/"),
        name="password_reset_confirm",
    ),
]
