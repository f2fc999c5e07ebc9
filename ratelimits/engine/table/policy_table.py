"""The policy table's index: which policies match a request, and how a new table is made
from the previous one by re-indexing only what changed.

Endpoints that are names (a ``throttle_scope``, a URL name) are a dict lookup. Path globs
are grouped by their literal prefix up to a ``/`` (:func:`~.globs.glob_prefix`), so a request
tries only the globs filed under one of its own path's prefixes.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable
from typing import TypeVar

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table.globs import Matcher, glob_matcher, glob_prefix, path_prefixes
from ratelimits.engine.table.pacing import UNPACED, Pacer, Unpaced

#: Up to this many globs, a request tries each in turn: cheaper than the index's lookups.
FEW_GLOBS = 16

#: One glob of the table: its policy's name (the order globs are answered in), its
#: matcher, its policy.
Glob = tuple[str, Matcher, CompiledPolicy]

K = TypeVar("K")
V = TypeVar("V")
#: Entries a paced copy of an index takes between two ticks.
COPY_SLICE = 256
_NAME = operator.attrgetter("name")
_FIRST = operator.itemgetter(0)


class PolicyTable:
    """Enabled policies, indexed for matching a request.

    Matching costs the path's depth plus the globs that could match, whatever the
    table's size; a table of at most :data:`FEW_GLOBS` globs tries them all, which is
    cheaper.

    Built with the ``previous`` table, a table re-indexes only the policies that are not
    the very objects ``previous`` holds (the source compiles again only the policies
    that changed, :mod:`ratelimits.database.policy_source`), and shares the rest of its index.
    ``pacer`` paces the build (:mod:`ratelimits.engine.table.pacing`) one small step at a time,
    from reading the source to the last index entry. A table never changes once built.
    """

    def __init__(
        self,
        policies: Iterable[CompiledPolicy],
        *,
        previous: PolicyTable | None = None,
        pacer: Pacer = UNPACED,
    ) -> None:
        ordered, unique = _in_name_order(policies, pacer)
        self.policies = tuple(ordered)
        before = _EMPTY if previous is None or not previous._unique or not unique else previous
        #: No two policies share a name (else the next table is indexed from scratch).
        self._unique = unique
        added, gone = _changes(before, ordered, pacer)
        self._by_policy_name = _replaced(
            before._by_policy_name, gone, ((p.name, p) for p in added), pacer
        )
        self._by_name = _reindexed(
            before._by_name,
            gone,
            ((name, p) for p in added for name in p.names),
            lambda policy: policy,
            _NAME,
            pacer,
        )
        self._matchers = _matchers(before._matchers, added, pacer)
        self._globs_by_prefix = _reindexed(
            before._globs_by_prefix,
            gone,
            (
                (glob_prefix(p.endpoint), (p.name, self._matchers[p.endpoint], p))
                for p in added
                if p.is_path_pattern
            ),
            operator.itemgetter(2),
            _FIRST,
            pacer,
        )
        self._forget_matchers(gone)
        #: The most ``/`` in a glob's prefix: a path's deeper prefixes file no glob.
        self._glob_depth = 0
        for prefix in self._globs_by_prefix:
            self._glob_depth = max(self._glob_depth, prefix.count("/"))
            pacer.tick()
        globs = sum(map(len, self._globs_by_prefix.values()))
        #: Every glob in policy-name order, when there are few enough to try them all.
        self._few_globs = (
            tuple(sorted((g for f in self._globs_by_prefix.values() for g in f), key=_FIRST))
            if globs <= FEW_GLOBS
            else None
        )

    def match(
        self,
        *,
        method: str,
        path: str,
        scope: str | None = None,
        url_name: str | None = None,
        sign_in: bool = False,
    ) -> list[CompiledPolicy]:
        """Policies whose endpoint is (or lists) ``scope`` or ``url_name``, or matches
        ``path`` (names first, then globs in the order of their policies' names). Sign-in
        policies (:attr:`~ratelimits.engine.policy.compiled.CompiledPolicy.signs_in`) are
        matched only with ``sign_in`` (``authenticate()``), and only they are then."""
        found: list[CompiledPolicy] = []
        if scope:
            found.extend(self._by_name.get(scope, ()))
        if url_name and url_name != scope:
            named = self._by_name.get(url_name, ())
            if found and named:  # a policy listing both the scope and the URL name
                held = found.copy()
                named = [p for p in named if all(p is not other for other in held)]
            found.extend(named)
        by_prefix = self._globs_by_prefix
        if self._few_globs is not None:
            found.extend(policy for _, matches, policy in self._few_globs if matches(path))
        elif by_prefix:
            globs = [
                (name, policy)
                for prefix in path_prefixes(path, self._glob_depth)
                if prefix in by_prefix
                for name, matches, policy in by_prefix[prefix]
                if matches(path)
            ]
            if len(globs) > 1:
                globs.sort(key=_FIRST)
            found.extend(policy for _, policy in globs)
        return [
            p for p in found if (not p.methods or method in p.methods) and p.signs_in is sign_in
        ]

    def get(self, name: str) -> CompiledPolicy | None:
        return self._by_policy_name.get(name)

    def _forget_matchers(self, gone: dict[int, CompiledPolicy]) -> None:
        """Drop the matchers of globs no policy of this table has any more."""
        for policy in gone.values():
            endpoint = policy.endpoint
            if policy.is_path_pattern and endpoint in self._matchers:
                found = self._globs_by_prefix.get(glob_prefix(endpoint), ())
                if all(other.endpoint != endpoint for _, _, other in found):
                    del self._matchers[endpoint]


def _no_table() -> PolicyTable:
    """A table of no policies, to build a first table from as from any previous one."""
    table = PolicyTable.__new__(PolicyTable)
    table.policies = ()
    table._by_policy_name, table._by_name, table._globs_by_prefix = {}, {}, {}
    table._matchers, table._glob_depth, table._few_globs = {}, 0, ()
    table._unique = True
    return table


_EMPTY = _no_table()


def _in_name_order(
    policies: Iterable[CompiledPolicy], pacer: Pacer
) -> tuple[list[CompiledPolicy], bool]:
    """``(policies sorted by name, no two share a name)``, read one step each (a source that
    reads them in order, as the database does, is not sorted again)."""
    found: list[CompiledPolicy] = []
    in_order, last = True, None
    for policy in policies:
        if last is not None and policy.name <= last:
            in_order = False
        last = policy.name
        found.append(policy)
        pacer.tick()
    if in_order:
        return found, True
    found.sort(key=_NAME)
    return found, all(a.name != b.name for a, b in itertools.pairwise(found))


def _changes(
    before: PolicyTable, policies: list[CompiledPolicy], pacer: Pacer
) -> tuple[list[CompiledPolicy], dict[int, CompiledPolicy]]:
    """``(added, gone)``: the policies ``before`` does not hold (new or changed), and those
    of ``before`` that ``policies`` no longer holds, by ``id``. Names are unique in both."""
    held = before._by_policy_name
    added: list[CompiledPolicy] = []
    for policy in policies:
        if held.get(policy.name) is not policy:
            added.append(policy)
        pacer.tick()
    gone = {id(old): old for old in map(held.get, (p.name for p in added)) if old is not None}
    if len(policies) - len(added) + len(gone) < len(held):  # some names are gone too
        names = set()
        for policy in policies:
            names.add(policy.name)
            pacer.tick()
        for old in before.policies:
            if old.name not in names:
                gone[id(old)] = old
            pacer.tick()
    return added, gone


def _replaced(
    held: dict[str, CompiledPolicy],
    gone: dict[int, CompiledPolicy],
    added: Iterable[tuple[str, CompiledPolicy]],
    pacer: Pacer,
) -> dict[str, CompiledPolicy]:
    """``held`` without the policies ``gone``, with those ``added``."""
    found = _copied(held, pacer)
    for policy in gone.values():
        if found.get(policy.name) is policy:
            del found[policy.name]
    for name, policy in added:
        found[name] = policy
        pacer.tick()
    return found


def _reindexed(
    index: dict[str, list[V]],
    gone: dict[int, CompiledPolicy],
    added: Iterable[tuple[str, V]],
    policy_of: Callable[[V], CompiledPolicy],
    order: Callable[[V], str],
    pacer: Pacer,
) -> dict[str, list[V]]:
    """``index`` (key -> entries sorted by ``order``) without the entries of the policies
    ``gone`` and with the entries ``added``: only the keys they touch get new lists; the
    others are shared with ``index``, whose lists are never changed."""
    new: dict[str, list[V]] = {}
    for key, entry in added:
        new.setdefault(key, []).append(entry)
        pacer.tick()
    touched = set(new)
    for policy in gone.values():
        touched.update(_keys_of(index, policy, policy_of))
    found = _copied(index, pacer)
    for key in touched:
        entries = [e for e in index.get(key, ()) if id(policy_of(e)) not in gone]
        entries.extend(new.get(key, ()))
        if entries:
            entries.sort(key=order)
            found[key] = entries
        else:
            found.pop(key, None)
        pacer.tick()
    return found


def _keys_of(
    index: dict[str, list[V]], policy: CompiledPolicy, policy_of: Callable[[V], CompiledPolicy]
) -> Iterable[str]:
    """Where ``policy`` is filed in ``index``: under each name of its endpoint, or its
    glob's prefix."""
    for key in (*policy.names, glob_prefix(policy.endpoint)):
        if any(policy_of(entry) is policy for entry in index.get(key, ())):
            yield key


def _matchers(
    held: dict[str, Matcher], added: Iterable[CompiledPolicy], pacer: Pacer
) -> dict[str, Matcher]:
    """``held`` with a matcher for each glob of the policies ``added`` (made only for a
    glob none held)."""
    found = _copied(held, pacer)
    for policy in added:
        if policy.is_path_pattern and policy.endpoint not in found:
            found[policy.endpoint] = glob_matcher(policy.endpoint)
            pacer.tick()
    return found


def _copied(held: dict[K, V], pacer: Pacer) -> dict[K, V]:
    """A copy of ``held``, made :data:`COPY_SLICE` entries at a time when paced: a copy in
    one call touches every key and value with the GIL held (hundreds of microseconds for
    thousands of entries whose memory went cold since the previous build)."""
    if isinstance(pacer, Unpaced):
        return dict(held)
    found: dict[K, V] = {}
    entries = iter(held.items())
    while chunk := list(itertools.islice(entries, COPY_SLICE)):
        found.update(chunk)
        pacer.tick()
    return found
