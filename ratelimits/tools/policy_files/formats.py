"""The formats of a policy file, JSON and YAML: telling which one a file is in, and a
document read from text or written to it."""

from __future__ import annotations

import json
import os
from types import ModuleType
from typing import Any

from ratelimits.exceptions import MissingExtra
from ratelimits.tools.policy_files.errors import PolicyFileError

FORMATS = ("json", "yaml")

_EXTENSIONS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def check_format(fmt: str) -> str:
    """``fmt`` in lower case when it is one of :data:`FORMATS`; :class:`PolicyFileError` if not."""
    normal = fmt.lower() if isinstance(fmt, str) else fmt
    if normal not in FORMATS:
        raise PolicyFileError(f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")
    return normal


def detect_format(path: str | os.PathLike[str] | None, explicit: str | None = None) -> str:
    """The format of a policy file: ``explicit`` if given, else from the extension of ``path``.

    ``None`` or ``"-"`` (standard input or output) is JSON.
    """
    if explicit is not None:
        return check_format(explicit)
    if path is None:
        return "json"
    path = os.fspath(path)
    if path == "-":
        return "json"
    extension = os.path.splitext(path)[1].lower()
    try:
        return _EXTENSIONS[extension]
    except KeyError:
        raise PolicyFileError(
            f"{path}: cannot tell the format from the file name; pass --format json|yaml."
        ) from None


def _yaml() -> ModuleType:
    try:
        import yaml
    except ImportError:
        missing = MissingExtra("YAML policy files", "PyYAML", "yaml")
        raise PolicyFileError(f"{missing} (JSON files need nothing).") from None
    return yaml


def dump_text(document: dict[str, Any], fmt: str) -> str:
    """``document`` as the text of a file in ``fmt`` (a checked format)."""
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return _yaml().safe_dump(document, sort_keys=False, allow_unicode=True)


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise ValueError(f"duplicate key {name!r} in an object")
        result[name] = value
    return result


def load_text(text: str, fmt: str, source: str) -> Any:
    """What the text of a file in ``fmt`` (a checked format) holds; :class:`PolicyFileError`
    naming ``source`` and the place when it is not valid JSON or YAML."""
    if fmt == "json":
        try:
            return json.loads(text, object_pairs_hook=_reject_duplicate_keys)
        except json.JSONDecodeError as e:
            raise PolicyFileError(
                f"{source}: line {e.lineno}, column {e.colno}: invalid JSON: {e.msg}."
            ) from None
        except ValueError as e:
            raise PolicyFileError(f"{source}: invalid JSON: {e}.") from None
        except RecursionError:
            raise PolicyFileError(f"{source}: invalid JSON: nested too deeply.") from None
    yaml = _yaml()
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = e.problem or " ".join(str(e).split())
        if e.context and e.problem:
            problem = f"{problem} ({e.context})"
        raise PolicyFileError(f"{source}: {where}invalid YAML: {problem}.") from None
    except yaml.YAMLError as e:
        message = " ".join(str(e).split())
        raise PolicyFileError(f"{source}: invalid YAML: {message}") from None
    except RecursionError:
        raise PolicyFileError(f"{source}: invalid YAML: nested too deeply.") from None
