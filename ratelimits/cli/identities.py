"""How the command names a client: its identity, with the user it stands for."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from ratelimits.engine.keys import kinds


def identity_label(tag: str, usernames: dict[str, str]) -> str:
    """``u:42 (alice)``, ``h:… (hashed)``, or the identity as it is."""
    if kinds.is_hashed(tag):
        return f"{tag} (hashed)"
    if tag in usernames:
        return f"{tag} ({usernames[tag]})"
    return tag


def usernames_of(tags: Iterable[str]) -> dict[str, str]:
    """``{"u:42": "alice"}`` for the user identities that name an existing user."""
    pks = {tag.removeprefix("u:") for tag in tags if tag.startswith("u:")}
    if not pks:
        return {}
    model = get_user_model()
    try:
        users = list(model._default_manager.filter(pk__in=pks))
    except (ValueError, TypeError, ValidationError):
        return {}
    return {f"u:{user.pk}": user.get_username() for user in users}
