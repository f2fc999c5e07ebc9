"""Hashed identities across a ``SECRET_KEY`` rotation.

A secret a client sends (an API key in a ``header:NAME`` policy's header, an API client's
principal) is counted and matched as an HMAC of it keyed from ``SECRET_KEY``
(:mod:`ratelimits.engine.keys.identity`). An override stores that hash, never the secret, so it
cannot be hashed again under a new key. When a site rotates ``SECRET_KEY`` and keeps the
old one in ``SECRET_KEY_FALLBACKS`` (as Django's own signing does), an override stored
under the old key must still match: the request's secret is hashed under each fallback key
too, and looked up among the policy's hashed overrides.

The cost stays off the usual request. A request hashes its secret once, under the current
key, as before. Only when a policy has hashed overrides, ``SECRET_KEY_FALLBACKS`` is not
empty, and no override matched the current hash, is the secret hashed again, once per
fallback key (one HMAC-SHA256 of a short string each, about a microsecond), and only for
that policy (:meth:`ratelimits.engine.policy.overrides.Overrides.rule`).

Counters are not carried over: a client's keys in Redis are named by the hash under the
current key, so after a rotation its counts start afresh (the old keys expire on their
own TTL; ``ratelimits reset`` with the secret deletes them too). A client can spend at
most one more window's allowance across the rotation.

Re-enter such an override (type the API key again in the admin, or import it) before the
old key leaves ``SECRET_KEY_FALLBACKS``: from then on it matches under the current key.
"""

from __future__ import annotations

import functools

from django.conf import settings

from ratelimits.conf import resets_on_setting_change
from ratelimits.engine.keys.identity import hash_key_of, header_identity, principal_identity

#: The identity forms that are keyed hashes of a client's secret (what an override can
#: store hashed): an API key in a header, an API client's principal.
HASHED_SECRETS = ("h:", "a:")


@functools.cache
def fallback_keys() -> tuple[bytes, ...]:
    """The HMAC keys of ``SECRET_KEY_FALLBACKS``, in order; empty when there are none."""
    secrets = getattr(settings, "SECRET_KEY_FALLBACKS", None) or ()
    return tuple(hash_key_of(secret) for secret in secrets)


def header_identities(name: str, value: str | bytes) -> tuple[str, ...]:
    """The identity of ``value`` in header ``name`` (its ``META`` key) under each fallback
    key (see :func:`~ratelimits.engine.keys.identity.header_identity`)."""
    return tuple(header_identity(name, value, key) for key in fallback_keys())


def principal_identities(text: str) -> tuple[str, ...]:
    """The identity of the principal ``text`` under each fallback key (see
    :func:`~ratelimits.engine.keys.identity.principal_identity`)."""
    return tuple(principal_identity(text, key) for key in fallback_keys())


resets_on_setting_change("SECRET_KEY_FALLBACKS")(fallback_keys.cache_clear)
