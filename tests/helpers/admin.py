"""The admin: logged-in clients, its history, and the signals a request sends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client

from ratelimits.models import Policy


def staff_client(*codenames: str) -> Client:
    """A client logged in as staff with only the ratelimits permissions ``codenames``."""
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="ratelimits", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


@contextmanager
def signal_senders(signal: Any) -> Iterator[list[tuple[Any, str]]]:
    """``(sender, policy)`` of every ``signal`` sent inside the block (``request_throttled``,
    ``request_near_limit``), in order."""
    senders: list[tuple[Any, str]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        senders.append((sender, kwargs["policy"]))

    signal.connect(receiver)
    try:
        yield senders
    finally:
        signal.disconnect(receiver)


def logged_in(user: Any) -> Client:
    """A test client logged in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def history(policy: Policy) -> list[str]:
    """The admin's change messages for ``policy``, oldest first."""
    entries = LogEntry.objects.filter(object_id=str(policy.pk)).order_by("action_time", "pk")
    return [entry.get_change_message() for entry in entries]
