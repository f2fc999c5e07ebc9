"""``manage.py ratelimits policies`` flags a policy whose endpoint matches no URL name,
scope or path of the URLconf (the demo project's, with ``search`` as SearchView's
throttle_scope and ``/api/search/`` its path), with the nearest match."""

from __future__ import annotations

import pytest

from tests.helpers import cells, make_policy, run, run_json

pytestmark = pytest.mark.django_db

UNMATCHED = "matches no URL name, scope or path"


def test_the_table_notes_the_policies_that_match_nothing():
    make_policy("fine", endpoint="api:search")
    make_policy("glob", endpoint="/api/payment/*")
    make_policy("slashless", endpoint="api/search/")
    make_policy("typo", endpoint="serach")
    lines = run("policies").splitlines()
    assert cells(lines[0])[-2:] == ["enabled", "note"]
    rows = {cells(line)[0]: cells(line) for line in lines[1:]}
    assert rows["fine"][-1] == "yes"  # no note
    assert rows["glob"][-1] == "yes"
    assert rows["slashless"][-1] == f"{UNMATCHED} (nearest: /api/search/)"
    assert rows["typo"][-1] == f"{UNMATCHED} (nearest: search)"


def test_no_note_column_when_every_policy_matches():
    make_policy("scope", endpoint="search")
    make_policy("name", endpoint="api:login")
    assert "note" not in cells(run("policies").splitlines()[0])


def test_the_json_says_which_policies_match_nothing_and_the_nearest_match():
    make_policy("fine", endpoint="search")
    make_policy("lost", endpoint="zzzzzzzzzz")
    make_policy("typo", endpoint="serach")
    rows = {row["name"]: row for row in run_json("policies")}
    assert (rows["fine"]["matches_nothing"], rows["fine"]["nearest_match"]) == (False, None)
    assert (rows["lost"]["matches_nothing"], rows["lost"]["nearest_match"]) == (True, None)
    assert (rows["typo"]["matches_nothing"], rows["typo"]["nearest_match"]) == (True, "search")
