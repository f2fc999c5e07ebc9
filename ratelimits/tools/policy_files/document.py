"""Reading a policy file: its text to the list of rows it holds, the document's shape
checked (``version``, ``policies``, a mapping per row); the rows themselves are checked by
the import plan."""

from __future__ import annotations

from typing import Any

from ratelimits.tools.policy_files.errors import PolicyFileError, describe
from ratelimits.tools.policy_files.formats import check_format, load_text
from ratelimits.tools.policy_files.schema import VERSION


def parse_document(text: str, fmt: str, source: str) -> list[dict[str, Any]]:
    """The rows of the policy file ``text`` in ``fmt``; ``source`` names it in error messages."""
    fmt = check_format(fmt)
    text = text.removeprefix("\ufeff")  # a byte order mark left by some editors
    if not text.strip():
        raise PolicyFileError(f"{source}: the file is empty; it holds no policy document.")
    document = load_text(text, fmt, source)
    if document is None and fmt == "yaml":  # comments only
        raise PolicyFileError(f"{source}: the file is empty; it holds no policy document.")
    if isinstance(document, dict):
        problems = []
        unknown = [key for key in document if key not in ("version", "policies")]
        if unknown:
            problems.append(
                f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
                "expected version and policies."
            )
        if "version" in document:
            version = document["version"]
            if type(version) is not int or version != VERSION:
                problems.append(
                    f"{source}: unsupported version {describe(version)}; "
                    f"this release reads version {VERSION}."
                )
        if "policies" not in document:
            problems.append(f"{source}: the key 'policies' (a list of policies) is missing.")
        if problems:
            raise PolicyFileError(problems)
        rows = document["policies"]
        if not isinstance(rows, list):
            raise PolicyFileError(
                f"{source}: 'policies' must be a list of policies, not {describe(rows)}."
            )
    elif isinstance(document, list):
        rows = document
    else:
        raise PolicyFileError(
            f"{source}: expected a mapping with 'version' and 'policies' or a list of "
            f"policies, not {describe(document)}."
        )
    problems = [
        f"{source}: row {number}: expected a mapping of field names to values, not {describe(row)}."
        for number, row in enumerate(rows, start=1)
        if not isinstance(row, dict)
    ]
    if problems:
        raise PolicyFileError(problems)
    return rows
