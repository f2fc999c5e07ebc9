"""Path globs, as a policy's endpoint writes them (fnmatch's wildcards): the literal prefix
a glob is filed under (:func:`glob_prefix`), the prefixes a path is looked up by
(:func:`path_prefixes`), and the cheapest test of a path against a glob
(:func:`glob_matcher`)."""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable

#: What makes an endpoint a glob (fnmatch's wildcards).
_WILDCARDS = re.compile(r"[*?[]")
#: A path glob as the table tries it: true when the path matches.
Matcher = Callable[[str], object]


def glob_prefix(pattern: str) -> str:
    """The literal part of a path glob up to its last ``/`` before the first wildcard:
    every path the glob matches starts with it (``/api/*/items`` -> ``/api/``; ``*.json``
    -> ``""``)."""
    wildcard = _WILDCARDS.search(pattern)
    literal = pattern if wildcard is None else pattern[: wildcard.start()]
    return literal[: literal.rfind("/") + 1]


def path_prefixes(path: str, depth: int = -1) -> list[str]:
    """``""`` and the prefixes of ``path`` that end in ``/``, the first ``depth`` of them
    (all with ``-1``): ``/a/b`` -> ``["", "/", "/a/"]``."""
    found = [""]
    slash = path.find("/")
    while slash != -1 and depth != 0:
        found.append(path[: slash + 1])
        slash = path.find("/", slash + 1)
        depth -= 1
    return found


def glob_matcher(pattern: str) -> Matcher:
    """What tells whether a path matches the glob ``pattern`` (as ``fnmatch.fnmatchcase``
    does): a glob whose only wildcard is a final ``*`` is a prefix test, one with no
    wildcard an equality, any other a compiled regular expression (the costly kind)."""
    if _WILDCARDS.search(pattern) is None:
        return pattern.__eq__
    if pattern.endswith("*") and _WILDCARDS.search(pattern, 0, len(pattern) - 1) is None:
        return operator.methodcaller("startswith", pattern[:-1])
    return re.compile(fnmatch.translate(pattern)).match
