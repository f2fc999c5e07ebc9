"""The demo's faces with the demo's own policies (``manage.py demo_setup``): Django's
LoginView under ``signin``, the async ``/hello/`` under ``hello``, the DRF
``/api/login/`` under ``login`` (failures only) and ``/api/report/`` under ``report``
(concurrency)."""

from __future__ import annotations

import io

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management import call_command

from project.api.demo_policies import DEMO_POLICIES
from ratelimits.engine.limiter import Check, decide, give_back
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.models import Policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_policies() -> None:
    call_command("demo_setup", stdout=io.StringIO())
    assert set(Policy.objects.values_list("name", flat=True)) == {p["name"] for p in DEMO_POLICIES}


def test_djangos_login_view_locks_an_address_out_after_five_failures(client, demo_policies):
    """signin counts failed sign-ins (the form again, with its error and a 400); the
    fifth starts the lockout and is answered as locked, the attempt after it locks the
    address out for 15 minutes, a correct password too; signin-pair locks that username
    out from that address only: its owner signs in from another."""
    User.objects.create_user(SIGN_IN["username"], password=SIGN_IN["password"])
    wrong = {**SIGN_IN, "password": "wrong"}
    assert client.post("/accounts/login/", SIGN_IN).status_code == 302  # not counted
    statuses = [client.post("/accounts/login/", wrong).status_code for _ in range(6)]
    assert statuses == [400] * 4 + [429] * 2
    locked = client.post("/accounts/login/", SIGN_IN)
    assert locked.status_code == 429
    assert 898 <= int(locked["Retry-After"]) <= 900
    assert client.get("/accounts/login/").status_code == 200  # GET is not under signin
    # Another address gets its own count for another username...
    stranger = {"username": "stranger", "password": "wrong"}
    other = client.post("/accounts/login/", stranger, REMOTE_ADDR="198.51.100.4")
    assert other.status_code == 400
    # ... and the username, locked out of 127.0.0.1 (signin-pair), signs in from there.
    other = client.post("/accounts/login/", SIGN_IN, REMOTE_ADDR="198.51.100.4")
    assert other.status_code == 302


def test_the_search_has_a_monthly_quota(client, demo_policies):
    """search-quota: 1,000 per calendar month per user or IP, in TIME_ZONE (UTC),
    beside search's 20 per minute; the usage endpoint shows both."""
    assert client.get("/api/search/?q=item").status_code == 200
    quota = client.get("/ratelimits/usage/").json()["policies"]
    found = {entry["name"]: entry for entry in quota}
    assert (found["search-quota"]["used"], found["search-quota"]["limit"]) == (1, 1000)
    assert (found["search-quota"]["calendar"], found["search-quota"]["time_zone"]) == (
        "month",
        "UTC",
    )
    assert found["search-quota"]["resets_at"].endswith("-01T00:00:00+00:00")
    assert (found["search"]["used"], found["search"]["limit"]) == (1, 20)


def test_the_home_page_links_the_usage_endpoint(client, demo_policies):
    assert 'href="/ratelimits/usage/"' in client.get("/").content.decode()


def test_the_async_hello_view_under_the_asgi_handler(async_client, demo_policies):
    get = async_to_sync(async_client.get)
    responses = [get("/hello/") for _ in range(11)]
    assert [r.status_code for r in responses] == [200] * 10 + [429]
    assert responses[0].json() == {"hello": "stranger"}
    assert responses[0]["RateLimit-Policy"] == '"hello";q=10;w=60'


#: Credentials of the demo's POST /api/login/: none (a 400), and a user's.
NO_CREDENTIALS: dict[str, str] = {}
SIGN_IN = {"username": "reader", "password": "demo-password-1"}


@pytest.fixture
def reader(demo_policies) -> None:
    User.objects.create_user(SIGN_IN["username"], password=SIGN_IN["password"])


def test_the_api_login_answers_as_the_readme_shows(client, demo_policies):
    """README: six POSTs without credentials answer 400 400 400 400 400 429, and the
    next 429 carries Retry-After: 60 and the login policy's fields."""
    statuses = [client.post("/api/login/", NO_CREDENTIALS).status_code for _ in range(6)]
    assert statuses == [400] * 5 + [429]
    denied = client.post("/api/login/", NO_CREDENTIALS)
    assert denied.status_code == 429
    assert denied["Retry-After"] == "60"
    assert denied["RateLimit-Policy"] == '"login";q=5;w=60'
    assert denied["RateLimit"] == '"login";r=0;t=60'


def test_the_api_login_counts_failed_sign_ins_only(client, reader):
    """login counts failures: a correct password never uses up the limit; once five
    failures are spent, a correct password is denied too."""
    wrong = {**SIGN_IN, "password": "wrong"}
    assert [client.post("/api/login/", wrong).status_code for _ in range(4)] == [400] * 4
    signed_in = [client.post("/api/login/", SIGN_IN) for _ in range(10)]
    assert [r.status_code for r in signed_in] == [200] * 10
    # Each sign-in was counted while in progress (4 failures and itself: r=0), and
    # given back after its response.
    assert {r["RateLimit"].partition(";t=")[0] for r in signed_in} == {'"login";r=0'}
    # The fifth failure starts signin-pair's lockout: answered as locked.
    assert client.post("/api/login/", wrong).status_code == 429
    assert client.post("/api/login/", SIGN_IN).status_code == 429
    assert client.post("/api/login/", wrong).status_code == 429
    # The pair has spent its five failures (signin-pair): the owner signs in from
    # another address, and so does another account.
    assert client.post("/api/login/", SIGN_IN, REMOTE_ADDR="198.51.100.4").status_code == 200
    User.objects.create_user("writer", password="demo-password-2")
    writer = {"username": "writer", "password": "demo-password-2"}
    assert client.post("/api/login/", writer, REMOTE_ADDR="198.51.100.4").status_code == 200


def test_the_report_takes_two_at_once_per_client(client, demo_policies):
    """report is a concurrency policy: two reports in progress at once per client; a
    report done gives its slot back, so one after another never runs out."""
    answers = [client.get("/api/report/") for _ in range(3)]
    assert [r.status_code for r in answers] == [200] * 3
    assert answers[0].json()["report"] == "items"
    assert {r["RateLimit-Policy"] for r in answers} == {'"report";q=2;w=60'}
    assert {r["RateLimit"] for r in answers} == {'"report";r=1;t=1'}

    # Two reports of this client in progress (taken here, as two workers would).
    report = CompiledPolicy.from_model(Policy.objects.get(name="report"))
    held = [decide([Check(report, "ip:127.0.0.1")]) for _ in range(2)]
    assert all(verdict.allowed for verdict in held)
    denied = client.get("/api/report/")
    assert denied.status_code == 429
    assert denied["Retry-After"] == "1"
    assert client.get("/api/report/", REMOTE_ADDR="198.51.100.4").status_code == 200
    give_back(held[0].receipt, 200)  # one finishes
    assert client.get("/api/report/").status_code == 200
    give_back(held[1].receipt, 200)
