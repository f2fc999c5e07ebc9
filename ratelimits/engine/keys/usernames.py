"""The one spelling of a username that every spelling a lookup accepts shares.

A per-username count is only as good as its folding: if the site's lookup finds one
account under two spellings and the counter sees two usernames, an attacker guesses
under each. Python's ``casefold`` is narrower than the databases' case-insensitive
lookups: PostgreSQL's ``UPPER`` (Django's ``__iexact``) maps the dotless i (U+0131) to
``I``, which ``casefold`` keeps apart, so ``william`` spelled with dotless i's and
``william`` were two counters but one account (a name with k i's had 2^k spellings).
Accent-insensitive collations (MySQL's ``*_ai_ci``) go further: ``é`` finds ``e``.

:func:`fold` is at least as wide as these: compatibility forms made plain (the Kelvin
sign, full-width letters, ligatures), accents and other combining marks dropped,
invisible format characters (zero-width joiners, soft hyphens) dropped, then every
letter through ``upper`` and ``lower`` before ``casefold``, so that a letter whose
upper case is another letter's (the dotless i and ``i``, the long s U+017F and ``s``,
the Greek final sigma U+03C2 and the sigma U+03C3) shares its counter. Two accounts
whose names differ only so (``René`` and ``Rene``) share a counter: stricter for them,
never looser for anyone.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories dropped: combining marks (accents), and format characters that
#: render as nothing (zero-width space and joiners, the soft hyphen, bidi marks).
_DROPPED = frozenset(("Mn", "Me", "Cf"))


def fold(username: str) -> str:
    """``username`` as its counter reads it: stripped, and folded so that every spelling a
    case- or accent-insensitive lookup takes for it reads the same (see the module)."""
    text = unicodedata.normalize("NFKD", username.strip())
    text = "".join(c for c in text if unicodedata.category(c) not in _DROPPED)
    text = text.upper().lower().casefold()
    text = unicodedata.normalize("NFKD", text)  # upper/lower may decompose again (İ)
    text = "".join(c for c in text if unicodedata.category(c) not in _DROPPED)
    return unicodedata.normalize("NFC", text).strip()
