"""The global switch, ``RATELIMITS["MODE"]``: every policy enforced, shadowed, or none.

``"enforce"`` (the default) applies each policy as its own ``mode`` says. ``"shadow"``
compiles every policy as a shadow one (:mod:`ratelimits.engine.policy.compiling`): each is
decided and counted as usual, and nothing is denied; a decision that would have denied is
a would-be denial (``shadow_denied``). ``"off"`` decides nothing: the faces let every
request through without reading the policy table or calling Redis. A value that is none
of these is a system-check error (``ratelimits.E007``) and enforces meanwhile.
"""

from __future__ import annotations

from ratelimits.conf import app_settings

ENFORCE = "enforce"
SHADOW = "shadow"
OFF = "off"
#: What ``MODE`` may be.
MODES = (ENFORCE, SHADOW, OFF)


def current() -> str:
    """The mode in effect: ``MODE``, or ``"enforce"`` for a value it cannot be."""
    value: object = app_settings.MODE
    return value if isinstance(value, str) and value in MODES else ENFORCE


def is_off() -> bool:
    """True when no policy is decided: the faces let every request through."""
    value: str = app_settings.MODE
    return value == OFF


def shadows_all() -> bool:
    """True when every policy is compiled as a shadow one."""
    value: str = app_settings.MODE
    return value == SHADOW
