"""One rule, three places that keep it: the model's validation, the database constraints
and the compiled policy all refuse the same policies, for the same reason
(ratelimits/engine/policy/rules.py)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import override_settings

from ratelimits.engine.policy import rules
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy

ROW = {"name": "p", "endpoint": "api:p", "algorithm": "sliding_log", "limit": 4, "window": 60}
BROKEN = [
    ({"key": "global", "lockout": 60}, "lockout", "A global policy has one counter"),
    ({"shards": 2, "lockout": 60}, "lockout", "A lockout needs one shard"),
    ({"algorithm": "concurrency", "lockout": 60}, "lockout", "A concurrency policy has no"),
    ({"algorithm": "concurrency", "counts": "failures"}, "counts", "gives every slot back"),
    ({"calendar": "day"}, "calendar", "Only a fixed_window policy counts in calendar"),
]


@pytest.mark.parametrize(("fields", "field", "reason"), BROKEN)
def test_the_model_the_database_and_the_engine_refuse_alike(db, fields, field, reason):
    row = {**ROW, **fields}
    with pytest.raises(ValidationError) as refused:
        Policy(**row).full_clean()
    assert reason in " ".join(refused.value.message_dict[field])
    with pytest.raises(ValueError, match=f"^{field}: .*{reason}"):
        CompiledPolicy.build(**row)
    with pytest.raises(IntegrityError), transaction.atomic():
        Policy.objects.create(**row)


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_calendar_policy_without_a_zone_counts_in_the_sites(db):
    assert rules.calendar_zone("") == "Europe/Berlin"
    assert rules.calendar_zone("Asia/Tokyo") == "Asia/Tokyo"
    row = {**ROW, "algorithm": "fixed_window", "calendar": "day"}
    assert CompiledPolicy.build(**row).time_zone == "Europe/Berlin"
    assert Policy(**row).rate_display.endswith("(Europe/Berlin)")
