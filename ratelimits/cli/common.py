"""What several subcommands need: finding a policy by name, reading an identity argument,
a policy file's format and where it goes."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.tools import inventory, policy_files
from ratelimits.tools.identities import identity_from_text, previous_identities


def find_policy(name: str, policies: dict[str, CompiledPolicy]) -> CompiledPolicy:
    """The policy called ``name``; a ``CommandError`` naming the close ones otherwise (or
    why it does not compile, for one of ``policies.unusable``)."""
    policy = policies.get(name)
    if policy is not None:
        return policy
    unusable = getattr(policies, "unusable", {}).get(name)
    if unusable is not None:
        raise CommandError(f"The policy {name!r} does not compile on this machine: {unusable}")
    close = difflib.get_close_matches(name, policies, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    if not policies:
        hint = " There are no policies."
    elif not close:
        hint = f" Policies: {', '.join(sorted(policies)[:20])}."
    raise CommandError(f"There is no policy {name!r}.{hint}")


def parse_identity(text: str, ipv6_prefix: int | None = None) -> str:
    """An ``--identity`` argument as the identity in the keys (see ``IDENTITY_FORMS``); an
    IPv6 address grouped by ``ipv6_prefix`` (the policy's; ``None``: ``IPV6_PREFIX``)."""
    try:
        return identity_from_text(text, ipv6_prefix)
    except ValueError as e:
        raise CommandError(f"--identity: {e}") from None


def identity_option(options: dict[str, Any], ipv6_prefix: int | None = None) -> str | None:
    """The ``--identity`` option as the identity in the keys; ``None`` when not given."""
    text = options.get("identity")
    return None if text is None else parse_identity(text, ipv6_prefix)


def ipv6_prefix_of(name: str | None, policies: dict[str, Any] | None = None) -> int | None:
    """The prefix the policy ``name`` groups IPv6 clients by (``None``: ``IPV6_PREFIX``)."""
    if name is None:
        return None
    policy = (inventory.known_policies() if policies is None else policies).get(name)
    return None if policy is None else policy.ipv6_prefix


def previous_identities_option(options: dict[str, Any]) -> tuple[str, ...]:
    """The ``--identity``'s secret hashed under each ``SECRET_KEY_FALLBACKS`` key (an API
    key, an API client; empty for other forms): an override stored before a rotation
    matches one, and the client's keys counted before it are named by one."""
    text = options.get("identity")
    return () if text is None else previous_identities(text)


def file_format(path: str | None, explicit: str | None) -> str:
    """The policy file format of ``path`` (``explicit``, else its suffix); a
    ``CommandError`` when neither says."""
    try:
        return policy_files.detect_format(path, explicit)
    except policy_files.PolicyFileError as e:
        raise CommandError(str(e)) from None


def write_document(command: BaseCommand, path: str | None, document: str) -> bool:
    """Write ``document`` to the file ``path``: True; to stdout when ``path`` is ``-`` or
    ``None``: False. A file that cannot be written is a ``CommandError``."""
    if path in (None, "-"):
        command.stdout.write(document, ending="")
        return False
    try:
        Path(path).write_text(document, encoding="utf-8")
    except OSError as e:
        raise CommandError(f"Cannot write {path}: {e.strerror or e}.") from None
    return True
