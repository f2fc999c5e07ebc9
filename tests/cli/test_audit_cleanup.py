"""``manage.py ratelimits audit-cleanup``: the sign-in records older than
``SIGN_IN_AUDIT_RETENTION`` days deleted, the others kept; a dry run counts them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from ratelimits.models import SignInAttempt
from tests.helpers import run
from tests.helpers.redis_setup import ratelimits_settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def records(settings: Any) -> None:
    settings.RATELIMITS = ratelimits_settings(SIGN_IN_AUDIT_RETENTION=30)
    now = timezone.now()
    for days in (0, 29, 31, 400):
        SignInAttempt.objects.create(
            when=now - timedelta(days=days), username=f"{days}-days", result="failed"
        )


def kept() -> list[str]:
    return sorted(SignInAttempt.objects.values_list("username", flat=True))


def test_a_dry_run_counts_and_deletes_nothing(records):
    text = run("audit-cleanup", "--dry-run")
    assert text.startswith("Dry run: would delete 2 sign-in records older than 30 days (before ")
    assert len(kept()) == 4


def test_the_old_records_are_deleted_and_the_recent_kept(records):
    text = run("audit-cleanup")
    assert text.startswith("Deleted 2 sign-in records older than 30 days")
    assert kept() == ["0-days", "29-days"]
    assert json.loads(run("audit-cleanup", "--json"))["deleted"] == 0


def test_the_retention_setting_is_checked(settings):
    from django.core.checks import run_checks

    settings.RATELIMITS = ratelimits_settings(SIGN_IN_AUDIT_RETENTION=0)
    messages = [m.msg for m in run_checks() if m.id == "ratelimits.E002"]
    assert messages == ["RATELIMITS: SIGN_IN_AUDIT_RETENTION must be a whole number of days >= 1."]
