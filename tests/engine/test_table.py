"""The policy table's matching: names by dict, globs by their literal prefix, and the same
answers as trying every glob."""

from __future__ import annotations

import fnmatch
import re
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from ratelimits.engine import table as table_module
from ratelimits.engine.policy import CompiledPolicy
from ratelimits.engine.table import PolicyTable, glob_prefix, path_prefixes


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
    for few in (table_module.FEW_GLOBS, 0):
        with mock.patch.object(table_module, "FEW_GLOBS", few):
            table = PolicyTable(policies)
        assert (table._few_globs is None) == (few == 0)
        for parts in paths:
            path = "/" + "/".join(parts)
            for method in ("GET", "POST"):
                for scope in (None, "search"):
                    found = [p.name for p in table.match(method=method, path=path, scope=scope)]
                    assert found == naive_match(table, method, path, scope)
