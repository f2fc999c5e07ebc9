"""Forged client addresses, replayed against the demo site under gunicorn and the real Redis.

The site trusts one proxy, 127.0.0.1 (``tests/security/addresses_settings.py``; it also
keeps ``NUM_PROXIES`` = 1 from before ``TRUSTED_PROXIES``, which believed every sender).
The test sends as that proxy from 127.0.0.1 and as an attacker who reaches the site
directly from 127.0.0.2. Each policy admits 3 GETs per minute per client address.

- An attacker's ``X-Forwarded-For`` / ``Forwarded`` changes nothing: no fresh counter per
  forged address, no exempt network claimed.
- Behind the proxy, the address it forwards is the client, in every form (a chain of
  trusted hops, ``Forwarded``, ``ip:port``, ``[v6]:port``): clients count apart.
- A policy with ``ipv6_prefix`` 48 counts a client rotating through the /64s of its /48 as
  one; a /64 policy does not.
"""

from __future__ import annotations

import http.client
import ipaddress
from collections.abc import Iterator

import pytest
import redis

from ratelimits.models import Policy
from ratelimits.testutils import free_port
from tests.security.addresses_settings import EXEMPT, PROXY
from tests.served import (
    Site,
    announce_new_version,
    gunicorn_command,
    serve,
    site_env,
    wait_for_policy,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ATTACKER = "127.0.0.2"
LIMIT = 3
WINDOW = 60
ITEMS = "/api/items/"
SEARCH = "/api/search/"


@pytest.fixture(scope="module")
def site(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """``gunicorn project.wsgi``, one sync worker, with the settings above."""
    port = free_port()
    log = tmp_path_factory.mktemp("forged") / "gunicorn.log"
    env = site_env(DJANGO_SETTINGS_MODULE="tests.security.addresses_settings")
    with serve(
        gunicorn_command(port, 1, "--worker-class", "sync"), port, log, env, "gunicorn"
    ) as site:
        yield site


def send(site: Site, path: str = ITEMS, source: str = PROXY, **headers: str) -> int:
    """One GET of ``path`` sent from ``source`` with ``headers``; the status."""
    conn = http.client.HTTPConnection("127.0.0.1", site.port, timeout=5, source_address=(source, 0))
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def limited(
    site: Site, redis_client: redis.Redis, name: str, path: str = ITEMS, **fields: object
) -> None:
    """A policy ``name`` of 3 GETs of ``path`` per minute per address, held by the worker."""
    endpoint = "api:items" if path == ITEMS else "search"
    Policy.objects.create(
        name=name,
        endpoint=endpoint,
        methods="GET",
        algorithm="sliding_log",
        limit=LIMIT,
        window=WINDOW,
        key="ip",
        **fields,
    )
    announce_new_version(redis_client)
    wait_for_policy(site, path, f'"{name}";q={LIMIT};w={WINDOW}')  # spends the proxy's own


def identities(redis_client: redis.Redis, policy: str) -> list[str]:
    """The identities counted under ``policy`` in Redis."""
    return sorted(
        {
            key.decode().split("}")[0][len("rl:{") :]
            for key in redis_client.scan_iter(match=f"rl:{{*}}:{policy}:*")
        }
    )


def test_an_attacker_gets_no_fresh_counter_by_forging_headers(
    site: Site, redis_client: redis.Redis
) -> None:
    limited(site, redis_client, "forged")
    forgeries = [
        {"X-Forwarded-For": "203.0.113.1"},
        {"Forwarded": "for=203.0.113.2"},
        {"X-Forwarded-For": "203.0.113.3, 127.0.0.1"},
        {"Forwarded": 'for="[2001:db8::3]:4711"'},
        {"X-Forwarded-For": "203.0.113.4:80", "Forwarded": "for=203.0.113.4"},
        {"X-Forwarded-For": "[2001:db8::5]:80"},
    ]
    statuses = [send(site, source=ATTACKER, **forged) for forged in forgeries]
    assert statuses == [200] * LIMIT + [429] * (len(forgeries) - LIMIT)
    assert identities(redis_client, "forged") == [f"ip:{PROXY}", f"ip:{ATTACKER}"]


def test_an_attacker_cannot_name_an_exempt_network(site: Site, redis_client: redis.Redis) -> None:
    limited(site, redis_client, "exempt")
    exempt = EXEMPT.replace(".0/16", ".5")  # 10.99.0.5
    claims = [{"X-Forwarded-For": exempt}, {"Forwarded": f"for={exempt}"}] * LIMIT
    statuses = [send(site, source=ATTACKER, **claim) for claim in claims]
    assert statuses == [200] * LIMIT + [429] * LIMIT
    # The same address, forwarded by the proxy, is exempt: the network is not broken.
    assert {send(site, **{"X-Forwarded-For": exempt}) for _ in range(2 * LIMIT)} == {200}


def test_behind_the_trusted_proxy_the_forwarded_address_is_the_client(
    site: Site, redis_client: redis.Redis
) -> None:
    limited(site, redis_client, "proxied")
    first = [
        {"X-Forwarded-For": "198.51.100.9, 127.0.0.1"},  # two trusted hops on one machine
        {"X-Forwarded-For": "6.6.6.6, 198.51.100.9"},  # whatever the client wrote on the left
        {"Forwarded": "for=198.51.100.9;proto=https"},
        {"X-Forwarded-For": "198.51.100.9"},
    ]
    assert [send(site, **headers) for headers in first] == [200] * LIMIT + [429]
    # Another client behind the same proxy has a counter of its own, in either header.
    assert send(site, **{"Forwarded": 'for="198.51.100.10:4711"'}) == 200
    assert send(site, **{"X-Forwarded-For": "198.51.100.11:4711"}) == 200
    assert identities(redis_client, "proxied") == [
        f"ip:{PROXY}",
        "ip:198.51.100.10",
        "ip:198.51.100.11",
        "ip:198.51.100.9",
    ]


def test_v6_port_entries_count_per_client_not_per_proxy(
    site: Site, redis_client: redis.Redis
) -> None:
    limited(site, redis_client, "v6-ports")
    one = {"X-Forwarded-For": "[2001:db8:a:1::1]:4711"}
    assert [send(site, **one) for _ in range(LIMIT + 1)] == [200] * LIMIT + [429]
    assert send(site, **{"X-Forwarded-For": "[2001:db8:b:1::1]:4711"}) == 200
    assert send(site, **{"Forwarded": 'for="[2001:db8:c:1::1]:4711"'}) == 200
    assert identities(redis_client, "v6-ports") == [
        "ip:127.0.0.1",
        "ip:2001:db8:a:1::/64",
        "ip:2001:db8:b:1::/64",
        "ip:2001:db8:c:1::/64",
    ]


def test_a_48_policy_counts_a_rotation_inside_the_48_as_one_client(
    site: Site, redis_client: redis.Redis
) -> None:
    """One client walks through six /64s of its /48: one counter under the /48 policy
    (on /api/items/), six under the /64 one (on /api/search/)."""
    limited(site, redis_client, "per-48", ITEMS, ipv6_prefix=48)
    limited(site, redis_client, "per-64", SEARCH)
    rotation = [{"X-Forwarded-For": f"2001:db8:5:{i:x}::{i + 1:x}"} for i in range(2 * LIMIT)]
    assert [send(site, ITEMS, **address) for address in rotation] == [200] * LIMIT + [429] * LIMIT
    assert [send(site, SEARCH, **address) for address in rotation] == [200] * (2 * LIMIT)
    assert identities(redis_client, "per-48") == ["ip:127.0.0.1", "ip:2001:db8:5::/48"]
    assert identities(redis_client, "per-64") == sorted(
        [
            "ip:127.0.0.1",
            *(f"ip:{ipaddress.ip_network(f'2001:db8:5:{i:x}::/64')}" for i in range(6)),
        ]
    )
    # Another /48 is another client.
    assert send(site, ITEMS, **{"X-Forwarded-For": "2001:db8:6::1"}) == 200


def test_an_unclosed_quote_never_swallows_the_address_the_proxy_appended(
    site: Site, redis_client: redis.Redis
) -> None:
    """A client writes ``Forwarded: for="``; the proxy appends ``, for=198.51.100.9``.
    Read from the left, the open quote ran to the end of the value, no hop was left, and
    the request counted as the proxy (exempt, where the proxies' network is). Read from
    the right, the proxy's element comes first and whole; a header the proxy sends with
    nothing readable counts as ``ip:unknown``, never as the proxy."""
    limited(site, redis_client, "unclosed")
    swallowing = {"Forwarded": 'for=", for=198.51.100.9'}
    assert [send(site, **swallowing) for _ in range(LIMIT + 1)] == [200] * LIMIT + [429]
    assert [send(site, **{"Forwarded": 'for="'}) for _ in range(LIMIT + 1)] == [200] * LIMIT + [429]
    assert identities(redis_client, "unclosed") == [
        f"ip:{PROXY}",
        "ip:198.51.100.9",
        "ip:unknown",
    ]
