"""The sign-in lines of the ``ratelimits`` log: each failed or refused sign-in at INFO, each
lockout that starts at WARNING, with the username as typed and the client's address.

A site that must not write usernames to its logs sets ``RATELIMITS["SIGN_IN_LOG_USERNAMES"]``
to ``False``: the lines then name the username by its identity in the keys
(``n:<32 hex>``, keyed with ``SECRET_KEY``), which ``manage.py ratelimits keys`` and
``reset --identity username:<name>`` find, so the lines still tell one account from another.
"""

from __future__ import annotations

import logging
from datetime import datetime

from ratelimits.conf import app_settings
from ratelimits.engine.keys.identity import username_identity

logger = logging.getLogger("ratelimits")


def shown_username(username: str | None) -> str:
    """``username`` as the log shows it: as typed (quoted), or its hashed identity when
    ``SIGN_IN_LOG_USERNAMES`` is false; ``-`` for none."""
    if not username:
        return "-"
    if app_settings.SIGN_IN_LOG_USERNAMES:
        return repr(str(username))
    return username_identity(username) or "-"


def failed(username: str | None, address: str, path: str, refused_by: str | None) -> None:
    """Log a failed sign-in (INFO); ``refused_by``: the policy that refused it before any
    password was checked."""
    if refused_by is None:
        logger.info(
            "ratelimits: sign-in failed: username %s from %s at %s",
            shown_username(username),
            address,
            path,
        )
    else:
        logger.info(
            "ratelimits: sign-in refused by policy %s: username %s from %s at %s",
            refused_by,
            shown_username(username),
            address,
            path,
        )


def lockout(
    policy: str, identity: str, username: str | None, address: str, until: datetime
) -> None:
    """Log a lockout that starts (WARNING)."""
    logger.warning(
        "ratelimits: lockout started by policy %s for %s: username %s from %s, until %s",
        policy,
        identity,
        shown_username(username),
        address,
        until.isoformat(timespec="seconds"),
    )
