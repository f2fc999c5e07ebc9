"""The policy table's matching: names by dict, globs by their literal prefix, and the same
answers as trying every glob; a table built from the previous one is the table built
from scratch."""

from __future__ import annotations

import fnmatch
import re
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.engine.table import policy_table as matching_module
from ratelimits.engine.table.globs import glob_matcher, glob_prefix, path_prefixes
from ratelimits.engine.table.policy_table import PolicyTable


def policy(name: str, endpoint: str, methods: str = "") -> CompiledPolicy:
    return CompiledPolicy.build(
        name=name, endpoint=endpoint, algorithm="fixed_window", limit=5, window=60, methods=methods
    )


def naive_match(table: PolicyTable, method: str, path: str, scope: str | None) -> list[str]:
    """Every policy tried in turn, as the table matched before it was indexed."""
    names = [p for p in table.policies if not p.is_path_pattern and p.endpoint == scope]
    globs = [
        p
        for p in table.policies
        if p.is_path_pattern and re.compile(fnmatch.translate(p.endpoint)).match(path)
    ]
    return [p.name for p in names + globs if not p.methods or method in p.methods]


def test_glob_prefix_stops_at_the_last_slash_before_a_wildcard():
    assert glob_prefix("/api/search/*") == "/api/search/"
    assert glob_prefix("/api/*/items") == "/api/"
    assert glob_prefix("/api/item?") == "/api/"
    assert glob_prefix("/api/[ab]x/*") == "/api/"
    assert glob_prefix("/api/login/") == "/api/login/"
    assert glob_prefix("*.json") == ""
    assert path_prefixes("/a/b/c") == ["", "/", "/a/", "/a/b/"]


def test_names_then_globs_in_policy_name_order_and_methods():
    table = PolicyTable(
        [
            policy("z-all", "/api/*"),
            policy("a-search", "/api/search/*", methods="GET"),
            policy("m-scope", "search"),
            policy("b-any-json", "*.json"),
            policy("c-other", "/other/*"),
        ]
    )
    found = table.match(method="GET", path="/api/search/x.json", scope="search")
    assert [p.name for p in found] == ["m-scope", "a-search", "b-any-json", "z-all"]
    found = table.match(method="POST", path="/api/search/x.json", scope="search")
    assert [p.name for p in found] == ["m-scope", "b-any-json", "z-all"]
    assert table.match(method="GET", path="/nothing/") == []
    assert table.get("c-other").endpoint == "/other/*"
    assert table.get("missing") is None


SEGMENT = st.sampled_from(["api", "a", "b", "search", "x.json", "", "items"])
GLOB_SEGMENT = st.sampled_from(["api", "a", "b", "search", "*", "?", "[ab]", "*.json", "it*"])


@settings(max_examples=300, deadline=None)
@given(
    globs=st.lists(st.lists(GLOB_SEGMENT, min_size=1, max_size=4), min_size=1, max_size=12),
    star_first=st.lists(st.sampled_from(["*.json", "*search*", "*"]), max_size=2),
    paths=st.lists(st.lists(SEGMENT, min_size=1, max_size=5), min_size=1, max_size=10),
    methods=st.lists(st.sampled_from(["", "GET", "POST", "GET,POST"]), min_size=14, max_size=14),
)
def test_the_index_answers_as_trying_every_glob(globs, star_first, paths, methods):
    endpoints = ["/" + "/".join(parts) for parts in globs] + star_first + ["search", "api:items"]
    policies = [
        policy(f"p{i:02d}", endpoint, methods[i % len(methods)])
        for i, endpoint in enumerate(endpoints)
    ]
    # Both ways of matching globs: every glob in turn (a small table) and the prefix index.
    for few in (matching_module.FEW_GLOBS, 0):
        with mock.patch.object(matching_module, "FEW_GLOBS", few):
            table = PolicyTable(policies)
        assert (table._few_globs is None) == (few == 0)
        for parts in paths:
            path = "/" + "/".join(parts)
            for method in ("GET", "POST"):
                for scope in (None, "search"):
                    found = [p.name for p in table.match(method=method, path=path, scope=scope)]
                    assert found == naive_match(table, method, path, scope)


PATH_CHAR = st.sampled_from("/ab.*?[]x-")


@settings(max_examples=500, deadline=None)
@given(pattern=st.text(PATH_CHAR, min_size=1, max_size=8), path=st.text(PATH_CHAR, max_size=8))
def test_a_globs_matcher_answers_as_fnmatch(pattern, path):
    """A prefix test for a final ``*``, an equality for no wildcard, a regular expression
    otherwise: each answers as ``fnmatch.fnmatchcase``."""
    assert bool(glob_matcher(pattern)(path)) == fnmatch.fnmatchcase(path, pattern)
    assert bool(glob_matcher(pattern)(pattern)) == fnmatch.fnmatchcase(pattern, pattern)


def test_a_table_built_with_the_previous_reuses_its_matchers():
    previous = PolicyTable([policy("a", "/a/[xy]/*"), policy("b", "/b/*")])
    table = PolicyTable([policy("a", "/a/[xy]/*"), policy("c", "/c/?/*")], previous=previous)
    assert table._matchers["/a/[xy]/*"] is previous._matchers["/a/[xy]/*"]
    assert [p.name for p in table.match(method="GET", path="/a/x/1")] == ["a"]
    assert [p.name for p in table.match(method="GET", path="/c/1/2")] == ["c"]
    assert table.match(method="GET", path="/b/1") == []


def test_policies_read_out_of_name_order_are_sorted():
    table = PolicyTable([policy("b", "/b/*"), policy("a", "/*"), policy("c", "x")])
    assert [p.name for p in table.policies] == ["a", "b", "c"]
    assert [p.name for p in table.match(method="GET", path="/b/1")] == ["a", "b"]


NAMES = st.sampled_from([f"p{i:02d}" for i in range(12)])
ENDPOINTS = st.sampled_from(
    ["search", "api:items", "/api/*", "/api/search/*", "/api/[ab]/*", "*.json", "/a/b/c", "/"]
)
#: What a step does to a policy: delete it, keep it as it is, or (re)write it.
ACTIONS = st.one_of(st.none(), st.just("keep"), st.tuples(ENDPOINTS, st.sampled_from(["", "GET"])))


def index_of(table: PolicyTable) -> tuple[object, ...]:
    """Everything a table's matching reads, policies by identity."""
    few = table._few_globs
    return (
        [id(p) for p in table.policies],
        {name: id(p) for name, p in table._by_policy_name.items()},
        {key: [id(p) for p in found] for key, found in table._by_name.items()},
        {k: [(n, id(p)) for n, _, p in found] for k, found in table._globs_by_prefix.items()},
        sorted(table._matchers),
        table._glob_depth,
        None if few is None else [(name, id(p)) for name, _, p in few],
    )


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.dictionaries(NAMES, ACTIONS), min_size=1, max_size=6),
    few=st.sampled_from([0, 2, matching_module.FEW_GLOBS]),
    reverse=st.booleans(),
)
def test_a_table_built_from_the_previous_is_the_table_built_from_scratch(steps, few, reverse):
    """Policies changed, added, deleted and kept (the same objects), step after step: the
    table re-indexed from the previous one holds the index a new table would."""
    current: dict[str, CompiledPolicy] = {}
    table: PolicyTable | None = None
    with mock.patch.object(matching_module, "FEW_GLOBS", few):
        for step in steps:
            for name, action in step.items():
                if action is None:
                    current.pop(name, None)
                elif action != "keep":
                    current[name] = policy(name, *action)
            given_order = sorted(current.values(), key=lambda p: p.name, reverse=reverse)
            previous_matchers = {} if table is None else dict(table._matchers)
            table = PolicyTable(given_order, previous=table)
            assert index_of(table) == index_of(PolicyTable(current.values()))
            for endpoint, matcher in table._matchers.items():
                assert previous_matchers.get(endpoint, matcher) is matcher  # reused


def test_policies_sharing_a_name_are_all_matched_and_the_next_table_starts_afresh():
    first = PolicyTable([policy("a", "/x/*"), policy("a", "search")])
    found = first.match(method="GET", path="/x/1", scope="search")
    assert [p.endpoint for p in found] == ["search", "/x/*"]
    second = PolicyTable([policy("a", "search")], previous=first)
    assert index_of(second) == index_of(PolicyTable(second.policies))
    assert second.match(method="GET", path="/x/1") == []
