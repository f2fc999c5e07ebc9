"""``RATELIMITS["MODE"]`` for the length of a test: :func:`limits_off` and
:func:`limits_shadow`, each usable as a context manager and a decorator (of a function,
a coroutine function or a test class), as Django's ``override_settings`` is."""

from __future__ import annotations

from typing import Any

from django.test.utils import override_settings

from ratelimits.conf import user_settings

# The values of ratelimits.engine.global_mode, written here: test settings import this package
# before Django is set up, and the engine's package would import far more.
_OFF, _SHADOW = "off", "shadow"


class ModeOverride(override_settings):
    """``override_settings`` of ``RATELIMITS`` with its ``MODE`` replaced, the other
    settings kept as they are when it takes effect."""

    def __init__(self, value: str) -> None:
        self.mode = value
        super().__init__(RATELIMITS=self._settings())  # a test class reads it when decorated

    def enable(self) -> None:
        self.options = {"RATELIMITS": self._settings()}
        super().enable()

    def _settings(self) -> dict[str, Any]:
        return {**user_settings(), "MODE": self.mode}


def limits_off() -> ModeOverride:
    """No policy decided, no Redis call: every face lets every request through::

    with limits_off():
        ...

    @limits_off()
    def test_signup_form(client): ...
    """
    return ModeOverride(_OFF)


def limits_shadow() -> ModeOverride:
    """Every policy decided and counted, nothing denied: a denial is a would-be denial
    (``Decision.shadow_denied``)."""
    return ModeOverride(_SHADOW)
