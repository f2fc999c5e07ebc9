"""The policy table's source: the enabled policies in name order, their overrides attached,
and only the policies changed since the previous load compiled again."""

from __future__ import annotations

import pytest

from ratelimits.database import policy_source
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy, PolicyOverride
from tests.helpers import make_policy

pytestmark = pytest.mark.django_db


def by_name() -> dict[str, object]:
    return {policy.name: policy for policy in policy_source.load()}


def test_a_load_compiles_only_the_policies_changed_since_the_previous():
    for name in ("b", "a", "c"):
        make_policy(name)
    make_policy("off", enabled=False)
    first = by_name()
    assert list(first) == ["a", "b", "c"]
    Policy.objects.filter(name="b").update(limit=9)
    second = by_name()
    assert second["a"] is first["a"] and second["c"] is first["c"]
    assert second["b"] is not first["b"]
    assert second["b"].limit == 9
    policy_source.reset()
    assert by_name() == second  # compiled again from scratch: the same policies


def test_a_policy_reused_gets_the_overrides_of_this_load(alice):
    policy = make_policy("a")
    [plain] = policy_source.load()
    assert plain.overrides is None
    PolicyOverride.objects.create(policy=policy, user=alice, limit=50)
    [overridden] = policy_source.load()
    assert overridden.for_client(str(alice.pk), "ip:192.0.2.1").limit == 50
    PolicyOverride.objects.all().delete()
    [again] = policy_source.load()
    assert again is plain


def test_a_settings_change_forgets_the_compiled_policies(settings):
    make_policy("a")
    [first] = policy_source.load()
    settings.TIME_ZONE = "Europe/Paris"
    [second] = policy_source.load()
    assert second is not first
    assert second == first


def test_a_policy_loads_as_the_orm_reads_it():
    """Rows are compared as the database driver returns them and converted only when
    they changed: the values are still the model's (SQLite's 0 is ``False``...)."""
    make_policy(
        "odd",
        endpoint="/api/*",
        methods="GET,POST",
        algorithm="token_bucket",
        limit=10,
        window=60,
        key="header:X-Api-Key",
        mode="shadow",
        fail_open=False,
        burst=20,
        cost=2,
    )
    [loaded] = policy_source.load()
    expected = CompiledPolicy.from_model(Policy.objects.get(name="odd"))
    assert loaded == expected
    assert loaded.fail_open is False and loaded.enforce is False
    assert loaded.burst == 20 and loaded.cost == 2


def test_a_policy_this_machine_cannot_compile_is_left_out_and_the_rest_still_load(caplog):
    """A calendar policy in a zone the machine's zoneinfo lacks (a row written elsewhere,
    or tzdata missing) limits nothing, with an error naming it; the others still load,
    and the row loads once it is fixed."""
    make_policy("a")
    make_policy("quota", algorithm="fixed_window", calendar="month", time_zone="UTC")
    make_policy("z")
    Policy.objects.filter(name="quota").update(time_zone="Mars/Olympus_Mons")
    with caplog.at_level("ERROR", logger="ratelimits"):
        assert list(by_name()) == ["a", "z"]
    assert "policy quota is left out of the table" in caplog.text
    assert "Mars/Olympus_Mons" in caplog.text
    Policy.objects.filter(name="quota").update(time_zone="Europe/Berlin")
    assert by_name()["quota"].time_zone == "Europe/Berlin"


def test_overrides_load_with_their_users_and_groups_in_separate_queries(
    alice, django_assert_num_queries
):
    from django.contrib.auth.models import Group

    partners = Group.objects.create(name="partners")
    alice.groups.add(partners)
    policy = make_policy("a")
    PolicyOverride.objects.create(policy=policy, user=alice, limit=50)
    PolicyOverride.objects.create(policy=policy, group=partners, limit=70)
    PolicyOverride.objects.create(policy=policy, identity="ip:192.0.2.9", exempt=True)
    # any override? the rows; their users; their groups; the groups' members; the policies
    with django_assert_num_queries(6):
        [loaded] = policy_source.load()
    assert loaded.for_client(str(alice.pk), "ip:192.0.2.1").limit == 50
    assert loaded.overrides is not None and loaded.overrides.users[str(alice.pk)].override == (
        f"user {alice}"
    )
    (members, rule), *_ = loaded.overrides.groups
    assert members == {str(alice.pk)} and rule.limit == 70 and rule.override == "group partners"
    assert loaded.for_client("nobody", "ip:192.0.2.9") is None  # exempt


def test_an_override_whose_user_is_deleted_between_the_queries_is_left_out(alice):
    policy = make_policy("a")
    PolicyOverride.objects.create(policy=policy, user=alice, limit=50)
    PolicyOverride.objects.create(policy=policy, identity="ip:192.0.2.9", limit=9)
    rows = list(PolicyOverride.objects.order_by("pk"))
    alice.delete()  # the database cascades; the rows read before still name her
    kept = policy_source._with_targets(rows, "default")
    assert [row.identity for row in kept] == ["ip:192.0.2.9"]


def test_a_load_with_no_override_compiles_no_query_after_the_first(monkeypatch, settings):
    """The policies' query and the override check are compiled once per connection: a
    background build only executes them (a compile is one long step it cannot pace)."""
    from django.db.models.sql.query import Query

    make_policy("a")
    list(policy_source.load())  # the first load compiles
    make_policy("b")

    def no_compile(*args, **kwargs):
        raise AssertionError("a query was compiled again")

    with monkeypatch.context() as patched:
        patched.setattr(Query, "get_compiler", no_compile)
        assert [p.name for p in policy_source.load()] == ["a", "b"]
    settings.TIME_ZONE = "Europe/Paris"  # a setting may change the SQL: compiled again
    with monkeypatch.context() as patched:
        patched.setattr(Query, "get_compiler", no_compile)
        with pytest.raises(AssertionError, match="compiled again"):
            list(policy_source.load())
    assert [p.name for p in policy_source.load()] == ["a", "b"]
