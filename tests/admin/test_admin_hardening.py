"""The admin under review: a new policy against guessing fails closed unless the operator
says otherwise, a global lockout is refused on its field, API keys posted by the override
rows and the reset form stay out of error reports, and a pk that is not a number is a 404."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.signals import got_request_exception
from django.db.models.signals import pre_save
from django.test import Client
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

from ratelimits.models import Policy, PolicyOverride
from tests.admin.test_admin import GOOD
from tests.helpers import make_policy, use

pytestmark = pytest.mark.django_db

ADD = "/admin/ratelimits/policy/add/"
CHANGELIST = "/admin/ratelimits/policy/"
API_KEY = "sk_live_9Qm2rT7vXa"
#: The add form as a browser posts it with fail_open left as shown (automatic).
UNTOUCHED = {**GOOD, "fail_open": "unknown"}


MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


@pytest.fixture
def admin_client(admin_user: Any) -> Client:
    """A superuser's client, logged in through ModelBackend by name (the first backend
    may be one that only counts sign-ins and keeps no session user)."""
    client = Client()
    client.force_login(admin_user, backend=MODEL_BACKEND)
    return client


def staff_client(*codenames: str) -> Client:
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="ratelimits", codename__in=codenames)
    )
    client = Client()
    client.force_login(user, backend=MODEL_BACKEND)
    return client


def added(staff: Any, **fields: str) -> Policy:
    response = staff.post(ADD, {**UNTOUCHED, **fields})
    assert response.status_code == 302, response.context["adminform"].form.errors
    return Policy.objects.get(name=fields.get("name", GOOD["name"]))


def test_the_add_form_offers_an_automatic_fail_mode(admin_client):
    field = admin_client.get(ADD).context["adminform"].form["fail_open"]
    html = str(field)
    assert '<option value="unknown" selected>Automatic' in html
    assert "Fail open" in html and "Fail closed" in html
    assert "fails closed" in field.help_text


@pytest.mark.parametrize(
    ("fields", "fail_open"),
    [
        ({}, True),  # an ordinary limit stays available when Redis is not
        ({"counts": "failures"}, False),
        ({"counts": "successes"}, True),
        ({"lockout": "900"}, False),
        ({"counts": "failures", "fail_open": "true"}, True),  # the operator decides
        ({"fail_open": "false"}, False),
        ({"counts": "failures", "fail_open": "on"}, True),  # a checkbox's post: open
    ],
)
def test_a_new_policy_against_guessing_fails_closed_unless_told(admin_client, fields, fail_open):
    assert added(admin_client, **fields).fail_open is fail_open


def test_a_sign_in_policy_fails_closed(admin_client):
    policy = added(admin_client, counts="sign_in_failures", key="username")
    assert policy.fail_open is False


def test_the_key_help_says_a_client_mints_header_values_and_what_caps_them(admin_client):
    help_text = admin_client.get(ADD).context["adminform"].form["key"].help_text
    assert "A client can send any header value it likes" in help_text
    assert "add an ip policy on the same endpoint" in help_text


def test_the_change_form_keeps_the_checkbox_and_the_saved_value(admin_client):
    policy = make_policy(counts="failures", fail_open=True)  # saved open on purpose
    page = admin_client.get(f"{CHANGELIST}{policy.pk}/change/")
    field = page.context["adminform"].form["fail_open"]
    assert 'type="checkbox"' in str(field) and "checked" in str(field)


def test_a_lockout_on_a_global_policy_is_refused_on_the_lockout_field(admin_client):
    response = admin_client.post(ADD, {**GOOD, "key": "global", "lockout": "900"})
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert list(form.errors) == ["lockout"]  # no constraint echo, no non-field error
    assert form.errors["lockout"] == [
        "A global policy has one counter for everyone: one client's denial would lock "
        "every client out. Set the lockout to 0, or count per user or ip."
    ]
    assert not Policy.objects.exists()


@contextmanager
def error_report() -> Iterator[list[str]]:
    """The text of the error report Django would mail the admins (or show with DEBUG)
    for a request that raised."""
    reports: list[str] = []

    def receiver(sender: Any, request: Any, **kwargs: Any) -> None:
        reports.append(ExceptionReporter(request, *sys.exc_info()).get_traceback_text())

    got_request_exception.connect(receiver)
    try:
        yield reports
    finally:
        got_request_exception.disconnect(receiver)


def test_an_api_key_posted_by_an_override_row_stays_out_of_error_reports(admin_client):
    policy = make_policy(key="header:X-Api-Key")
    url = f"{CHANGELIST}{policy.pk}/change/"
    data = {
        **GOOD,
        "key": "header:X-Api-Key",
        "overrides-TOTAL_FORMS": "1",
        "overrides-0-identity": API_KEY,
        "overrides-0-limit": "50",
        "overrides-0-comment": "partner plan",
    }

    def explode(**kwargs: Any) -> None:
        raise RuntimeError("the database went away")

    pre_save.connect(explode, sender=PolicyOverride)
    admin_client.raise_request_exception = False
    try:
        with error_report() as reports:
            response = admin_client.post(url, data)
    finally:
        pre_save.disconnect(explode, sender=PolicyOverride)
    assert response.status_code == 500
    [report] = reports
    assert API_KEY not in report
    assert "overrides-0-identity = '********************'" in report
    assert "overrides-0-comment = 'partner plan'" in report  # only the secrets are hidden
    request = response.wsgi_request
    hidden = SafeExceptionReporterFilter().get_post_parameters(request)
    assert hidden["overrides-0-identity"] == "********************"


def test_the_reset_forms_identity_is_marked_sensitive(admin_client):
    policy = make_policy(key="header:X-Api-Key")
    url = f"{CHANGELIST}{policy.pk}/reset-counters/"
    response = admin_client.post(url, {"identity": f"header:X-Api-Key={API_KEY}"})
    assert response.status_code == 302
    hidden = SafeExceptionReporterFilter().get_post_parameters(response.wsgi_request)
    assert hidden["identity"] == "********************"


@pytest.mark.parametrize("pk", ["abc", "1.5", "-", "%20", "99999"])
def test_a_reset_of_no_such_policy_is_a_404(admin_client, pk):
    make_policy()
    assert admin_client.post(f"{CHANGELIST}{pk}/reset-counters/").status_code == 404


def test_every_custom_admin_url_answers_a_bad_pk_without_a_500(admin_client):
    """Django's own pages send a missing object back to the index; ours answer 404."""
    admin_client.raise_request_exception = True  # a 500 would raise here
    for path in ("change/", "delete/", "history/"):
        assert admin_client.get(f"{CHANGELIST}abc/{path}").status_code == 302
    assert admin_client.post(f"{CHANGELIST}abc/reset-counters/").status_code == 404
    assert admin_client.get("/admin/ratelimits/dashboard/").status_code == 200


def test_the_reset_url_and_action_need_the_reset_permission(redis_client):
    policy = make_policy()
    use(policy, "ip:203.0.113.7", 3)
    editor = staff_client("view_policy", "change_policy")
    assert editor.post(f"{CHANGELIST}{policy.pk}/reset-counters/").status_code == 403
    assert editor.post(f"{CHANGELIST}abc/reset-counters/").status_code == 403  # before the pk
    editor.post(CHANGELIST, {"action": "reset_counters", "_selected_action": [policy.pk]})
    assert redis_client.exists("rl:{ip:203.0.113.7}:login:log") == 1
