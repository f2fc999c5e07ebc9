"""The demo's database from the environment: ``DATABASE_URL``, else SQLite in ``DEMO_DB``.

``DATABASE_URL`` is ``postgresql://USER[:PASSWORD]@HOST[:PORT]/NAME`` or ``sqlite:///PATH``
(everything after the third slash is the path: ``sqlite:////tmp/db.sqlite3``). The tests
pass their own test database to the processes they start this way (:func:`url_of`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlsplit

_ENGINES = {
    "postgresql": "django.db.backends.postgresql",
    "postgres": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
}


def from_url(url: str) -> dict[str, Any]:
    """Django's ``DATABASES`` entry for ``url``."""
    parts = urlsplit(url)
    engine = _ENGINES.get(parts.scheme)
    if engine is None:
        raise ValueError(
            f"DATABASE_URL {parts.scheme!r}: use postgresql://USER@HOST:PORT/NAME or sqlite:///PATH"
        )
    if parts.scheme == "sqlite":
        return {"ENGINE": engine, "NAME": unquote(url.removeprefix("sqlite:///"))}
    return {
        "ENGINE": engine,
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


def url_of(entry: dict[str, Any]) -> str:
    """The ``DATABASE_URL`` of a ``DATABASES`` entry (the inverse of :func:`from_url`)."""
    if entry["ENGINE"] == _ENGINES["sqlite"]:
        return "sqlite:///" + quote(str(entry["NAME"]))
    login = quote(entry.get("USER") or "")
    if entry.get("PASSWORD"):
        login += ":" + quote(entry["PASSWORD"], safe="")
    port = f":{entry['PORT']}" if entry.get("PORT") else ""
    return f"postgresql://{login}@{entry.get('HOST') or ''}{port}/{quote(entry['NAME'])}"
