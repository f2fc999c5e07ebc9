"""The demo's plain Django views, limited by RateLimitMiddleware: Django's own
``LoginView``, answering a failed sign-in with a 400, and a native async view, limited on
the event loop."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse


class SignInView(LoginView):
    """Django's ``LoginView``, under the ``signin`` policy (POST, failures only, then a
    lockout). A wrong password shows the form again with a 400, not Django's 200, so that
    the policy counts it as a failure; a sign-in that succeeds (a redirect) gives its
    unit back."""

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        response.status_code = 400
        return response


async def hello(request: HttpRequest) -> JsonResponse:
    """``GET /hello/``: under the ``hello`` policy."""
    user = await request.auser()
    name = user.get_username() if user.is_authenticated else "stranger"
    return JsonResponse({"hello": name})
