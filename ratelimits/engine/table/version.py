"""The policy table's version stamp in Redis (:func:`~ratelimits.engine.keys.names.version_key`):
a random value that every committed policy change, and every reset of counters, replaces
(:func:`announce`), and that each worker reads back at its periodic check
(:func:`read_version`) to learn that its table is out of date."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from ratelimits.conf import app_settings
from ratelimits.engine.keys.names import version_key
from ratelimits.engine.store import breaker as breakers
from ratelimits.engine.store import connection
from ratelimits.engine.store import route as routes
from ratelimits.exceptions import ConfigurationError

logger = logging.getLogger("ratelimits")


def announce() -> str | None:
    """Write a new version stamp; ``None`` (logged) when Redis cannot take it."""
    try:
        # A fresh random stamp, not a counter: after Redis lost its data a counter would
        # start again at 1, a value a worker may already hold, and that worker would miss
        # the change until POLICY_MAX_AGE.
        stamp = uuid.uuid4().hex
        connection.get_client().set(version_key(app_settings.KEY_PREFIX), stamp)
    except (*connection.REDIS_ERRORS, ConfigurationError) as e:
        logger.warning(
            "ratelimits: could not announce a policy change to other workers (%s); "
            "they pick it up within POLICY_MAX_AGE (%s s).",
            e,
            app_settings.POLICY_MAX_AGE,
        )
        return None
    return stamp


def as_read(stamp: str, held: Any) -> Any:
    """``stamp`` as the client reads it back: ``str`` from a client that decodes replies
    (the version ``held`` is then a ``str``), else ``bytes``."""
    return stamp if isinstance(held, str) else stamp.encode()


def read_version(known: bytes | None) -> bytes | None:
    """The version stamp in Redis; ``known`` when Redis cannot answer.

    A missing stamp is written (a random one, unless another worker wrote one first): the
    stamp then disappears only when Redis loses its data, and every worker notices that
    as a change, reloads and forgets the denials it remembers for counts that are gone."""
    key = version_key(app_settings.KEY_PREFIX)
    try:
        route = routes.current()
        guard = route.guard(key, writes=False)  # an open breaker's try is a decide call's
    except (connection.Unreachable, routes.BreakerOpen):  # the breaker logs its opening
        return known
    except ConfigurationError as e:
        breakers.breaker.failure(e)
        return known
    client = route.client
    try:
        version = client.get(key)
        wrote = version is None
        if wrote:
            client.set(key, uuid.uuid4().hex, nx=True)
            version = client.get(key)
    except connection.REDIS_ERRORS as e:
        guard.failure(e)
        return known
    if wrote:
        guard.success()
    else:  # a read answered: not proof that Redis takes writes (a full one reads)
        guard.read_success()
    return version
