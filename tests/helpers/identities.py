"""Identities and keys: hashed secrets, header values a client may send, bounded keys."""

from __future__ import annotations

import re
from typing import Any

from ratelimits.engine.keys import names as keys
from ratelimits.engine.keys.identity import header_identity, meta_key
from ratelimits.engine.policy.compiled import CompiledPolicy

HASHED_HEADER = re.compile(r"h:[0-9a-f]{32}")
HASHED_USER = re.compile(r"u#[0-9a-f]{32}")
LONGEST_PREFIX = "p" * 32
LONGEST_NAME = "n" * 64

#: Header values a client may send, by what is odd about them.
NASTY_HEADER_VALUES: dict[str, str | bytes] = {
    "1 MB": "k" * 1_000_000,
    "emoji": "🔑🚀" * 200,
    "rtl": "\u202eyek-ipa\u202c שלום مرحبا",
    "control": "\x1b[31m\r\n\t\x7f",
    "nul": "abc\x00def\x00",
    "braces": "}{evil}{",
    "latin-1 bytes": b"caf\xe9 \xff\xfe secret",
}


def hashed(secret: str, header: str = "X-Api-Key") -> str:
    """The identity the limiter gives a request carrying ``header: secret``."""
    return header_identity(meta_key(header), secret)


def search_policy(name: str, key: str = "user_or_ip", **fields: Any) -> CompiledPolicy:
    """A policy on api:search counting by ``key``: sliding_counter, 5 per 60 s."""
    return CompiledPolicy.build(
        name=name,
        endpoint="api:search",
        algorithm="sliding_counter",
        limit=5,
        window=60,
        key=key,
        **fields,
    )


def header_policy(name: str = "api-key") -> CompiledPolicy:
    return search_policy(name, "header:X-Api-Key")


def user_policy(name: str = "per-user") -> CompiledPolicy:
    return search_policy(name)


def assert_bounded(key: str, identity: str) -> None:
    """A key is short, has one hash tag, and that tag is exactly ``identity``."""
    assert len(key) <= keys.MAX_KEY_LENGTH, len(key)
    assert key.count("{") == 1, key[:200]
    assert key.count("}") == 1, key[:200]
    parsed = keys.KEY_PATTERN.match(key)
    assert parsed is not None, key[:200]
    assert parsed["identity"] == identity
