"""The migrations describe the models as they are: no change is left without one."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_have_no_unmigrated_changes() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "ratelimits", "--check", "--dry-run", stdout=out)
    except SystemExit:
        pytest.fail(f"the models changed without a migration:\n{out.getvalue()}")
