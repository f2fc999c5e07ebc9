"""Paths a path glob matches, to try against the URLconf's regexes."""

from __future__ import annotations

import fnmatch
import string

#: Texts tried in a glob's ``*`` (all of its stars at once).
STAR_FILLINGS = ("", "1", "a", "/", "1/", "a/")


#: A glob's wildcards among its literal characters (no endpoint holds a NUL).
_STAR = "\0*"
_ANY = "\0?"


def path_fillings(glob: str) -> list[str]:
    """Paths that ``glob`` matches: its ``*`` filled with each of :data:`STAR_FILLINGS`, its
    ``?`` with ``1`` or ``a`` and a ``[...]`` class with its first printable member."""
    parts: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        char = glob[i]
        i += 1
        if char == "*":
            parts.append(_STAR)
        elif char == "?":
            parts.append(_ANY)
        elif char == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            j = glob.find("]", j)
            if j == -1:
                parts.append("[")  # fnmatch reads a "[" without its "]" as itself
                continue
            members = [c for c in string.printable if fnmatch.fnmatchcase(c, glob[i - 1 : j + 1])]
            if not members:
                return []  # a class nothing matches: the glob matches no path
            parts.append(members[0])
            i = j + 1
        else:
            parts.append(char)
    found = []
    for star in STAR_FILLINGS:
        any_char = "a" if star[:1].isalpha() else "1"
        found.append(
            "".join(star if part == _STAR else any_char if part == _ANY else part for part in parts)
        )
    return found
