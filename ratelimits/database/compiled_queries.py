"""Queries compiled once per database connection, then run as their SQL.

Compiling a Django query is pure Python: hundreds of microseconds with the cold caches a
background build of the policy table runs with, in one step that cannot be paced (the
build would hold the GIL that long while a request waits for it). A :class:`Prepared`
query keeps the SQL, its parameters and the converters the ORM applies to its columns,
per connection object (each thread has its own), so that a later build only executes it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from ratelimits.conf import ANY_SETTING, resets_on_setting_change

#: A column's converters, as the ORM applies them: ``(position, functions, expression)``.
Converters = list[tuple[int, list[Callable[..., Any]], Any]]


@dataclass(frozen=True)
class Prepared:
    """One compiled ``values_list()`` query: its SQL, parameters and column converters."""

    sql: str
    params: tuple[Any, ...]
    converters: Converters

    def rows(self, database: str, chunk: int) -> Iterator[tuple[Any, ...]]:
        """The rows as the database driver hands them over, fetched ``chunk`` at a time."""
        with connections[database].cursor() as cursor:
            cursor.execute(self.sql, self.params)
            while found := cursor.fetchmany(chunk):
                yield from found

    def convert(self, row: tuple[Any, ...], database: str) -> list[Any]:
        """``row``'s values as ``values_list()`` gives them (the backend's and the
        fields' converters applied)."""
        connection = connections[database]
        values = list(row)
        for position, functions, expression in self.converters:
            value = values[position]
            for function in functions:
                value = function(value, expression, connection)
            values[position] = value
        return values


_prepared: weakref.WeakKeyDictionary[Any, dict[str, Prepared]] = weakref.WeakKeyDictionary()


def prepare(name: str, database: str, query: Callable[[], QuerySet[Any, Any]]) -> Prepared:
    """The query ``name`` on ``database``, compiled from ``query()`` (a ``values_list()``
    queryset) the first time this thread's connection asks for it."""
    connection = connections[database]
    held = _prepared.get(connection)
    if held is None:
        held = _prepared[connection] = {}
    found = held.get(name)
    if found is None:
        compiler = query().query.get_compiler(database)
        sql, params = compiler.as_sql()
        columns = [column for column, _, _ in compiler.select[: compiler.col_count]]
        converters = [
            (position, functions, expression)
            for position, (functions, expression) in compiler.get_converters(columns).items()
        ]
        found = held[name] = Prepared(sql, tuple(params), converters)
    return found


@resets_on_setting_change(ANY_SETTING)
def forget() -> None:
    """Compile every query again at its next use (a setting may change its SQL)."""
    _prepared.clear()
