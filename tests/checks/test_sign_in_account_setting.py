"""``RATELIMITS["SIGN_IN_ACCOUNT"]``: a dotted path that imports a callable, else E002."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks


def e002(settings: Any, value: Any) -> list[str]:
    settings.RATELIMITS = {**settings.RATELIMITS, "SIGN_IN_ACCOUNT": value}
    return [m.msg for m in run_checks() if m.id == "ratelimits.E002"]


@pytest.mark.parametrize("value", ["no.such.module.hook", "ratelimits.conf.DEFAULTS", 3])
def test_a_path_that_names_no_callable_is_an_error(settings, value):
    (message,) = e002(settings, value)
    assert "SIGN_IN_ACCOUNT must be the dotted path of a callable" in message


@pytest.mark.parametrize("value", [None, "tests.security.test_username_spellings.by_email"])
def test_none_or_a_callable_passes(settings, value):
    assert e002(settings, value) == []
