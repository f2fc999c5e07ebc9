"""The sign-in audit trail's check (I023): sign-in protection installed, and the audit
trail neither turned on nor declined."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Info, Tags, register

from ratelimits.checks.names import SIGN_IN_BACKEND_PATH
from ratelimits.conf import user_settings


@register(Tags.security)
def check_sign_in_audit(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """I023: ``RateLimitBackend`` is installed and ``SIGN_IN_AUDIT`` is unset (say ``True``
    to keep a record of each attempt, or ``False`` to silence this)."""
    if SIGN_IN_BACKEND_PATH not in getattr(settings, "AUTHENTICATION_BACKENDS", ()):
        return []
    if not isinstance(getattr(settings, "RATELIMITS", None) or {}, dict):
        return []  # E001 says what is wrong with the setting first
    if "SIGN_IN_AUDIT" in user_settings():
        return []
    return [
        Info(
            "Sign-in attempts are limited but not recorded: no audit trail says who tried "
            "which username from where.",
            hint="Set RATELIMITS['SIGN_IN_AUDIT'] = True to record every attempt (the admin's "
            "Sign-in attempts, written off the request path), or False to keep it off and "
            "silence this. See docs/sign-in.md.",
            id="ratelimits.I023",
        )
    ]
