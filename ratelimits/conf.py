"""Internal, not part of the public API (see docs/api.md): the ``RATELIMITS`` setting,
with its defaults in one place, read through one cached object, and the one receiver of
``setting_changed``.

Use ``ratelimits.conf.app_settings.NAME``; ``override_settings(RATELIMITS=...)`` works in
tests. This module imports only Django and never the modules it resets: a module that
caches something built from a setting (the Redis client, the policy table, the exempt
networks, the hash key) registers the function that forgets it with
:func:`resets_on_setting_change`, naming the settings it is built from, when the module is
imported. Per-process state that no setting builds (the breakers, the unsent counts)
registers with :func:`resets_process_state`. The one receiver calls the first kind when
one of their settings changes; :func:`reset_registered` (``reset_state()`` in the test
helpers) calls both kinds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # "enforce": each policy as its mode says; "shadow": every policy decided and counted,
    # nothing denied (a denial is counted as a would-be one); "off": nothing decided, no
    # Redis call, every request let through (ratelimits.engine.global_mode).
    "MODE": "enforce",
    # Alias of the django-redis (or django-valkey) cache whose server holds the counters.
    "CACHE": "default",
    # Startup nodes ("redis://host:port") of a Redis Cluster to use instead of CACHE.
    "CLUSTER_NODES": [],
    # Connection options of the cluster's nodes (TLS, credentials), passed to
    # redis-py's RedisCluster: {"ssl": True, "ssl_ca_certs": "/path/ca.pem", ...}.
    "CLUSTER_OPTIONS": {},
    # First part of every Redis key the app writes.
    "KEY_PREFIX": "rl",
    # Socket and connect timeout, seconds, of the limiter's own connection.
    "SOCKET_TIMEOUT": 0.1,
    # How often (seconds) a worker checks whether the policy table changed.
    "POLICY_REFRESH_INTERVAL": 1.0,
    # A worker reloads its table at least this often (seconds), even with no change seen.
    "POLICY_MAX_AGE": 60.0,
    # Reverse proxies in front of the site that append to X-Forwarded-For, counted from
    # the right and believed whoever sent the header; ignored when TRUSTED_PROXIES is set.
    "NUM_PROXIES": 0,
    # Networks of the site's proxies ("10.0.0.0/8", "127.0.0.1", "2001:db8::/32"): their
    # X-Forwarded-For / Forwarded is read, from the right while each hop is trusted.
    "TRUSTED_PROXIES": [],
    # The one forwarding header the trusted proxies write: "X-Forwarded-For" or
    # "Forwarded"; the other is never read. None: both are read, and a request whose two
    # headers name different clients counts as ip:unknown.
    "FORWARDED_HEADER": None,
    # IPv6 clients are grouped by this prefix length (128 = one address each).
    "IPV6_PREFIX": 64,
    # NAT64/SIIT prefixes (RFC 6052: /32, /40, /48, /56, /64 or /96): a client address in
    # one is the IPv4 address it embeds, counted, exempted and overridden as that address.
    "NAT64_PREFIXES": ["64:ff9b::/96"],
    # Send the IETF draft RateLimit / RateLimit-Policy response headers.
    "HEADERS": True,
    # Consecutive Redis failures that open the circuit breaker.
    "BREAKER_THRESHOLD": 3,
    # Seconds the open breaker skips Redis before trying again.
    "BREAKER_COOLDOWN": 1.0,
    # Retry-After (seconds) sent when a fail-closed policy denies because Redis is unavailable.
    "FAIL_CLOSED_RETRY_AFTER": 1,
    # Seconds between a worker's sends of its per-minute request counts (admin dashboard).
    "METRICS_FLUSH_INTERVAL": 5.0,
    # Keep each policy's traffic record (how far its clients go per window, per hour, for
    # 7 days: the admin's Traffic panel, `ratelimits traffic`). False: none is kept; a
    # policy's own `traffic` field turns it off for that policy.
    "TRAFFIC": True,
    # Over-limit keys a worker remembers, to deny their floods without Redis (0: off).
    "LOCAL_DENIALS": 10_000,
    # Dotted path of a view (request, exception) rendering the middleware's and the
    # decorator's 429s, like CSRF_FAILURE_VIEW; None: JSON or text, by the Accept header.
    "THROTTLED_VIEW": None,
    # Client networks no policy limits ("10.0.0.0/8", "2001:db8::/32"), e.g. health checks.
    "EXEMPT_NETWORKS": [],
    # Fraction of a client's limit, in (0, 1], whose crossing by an admitted request is
    # counted (ratelimits_near_limit_total, the dashboard) and sent as request_near_limit.
    "NEAR_LIMIT": 0.8,
    # The largest cost a view may ask for (ratelimit_cost, the decorator's cost, ninja's
    # cost); a larger one is refused, logged once a minute per view, and the policies'
    # own costs apply, as for a cost that is not a whole number. A cost no longer costs Redis
    # anything (one entry whatever it is): this bounds what a client can make a view ask
    # for when the cost comes from its request (a batch's size). 1,000 is above the
    # batches and pages APIs usually accept and far below the limits it would matter
    # against; a site whose batches are larger raises it.
    "MAX_COST": 1000,
    # Client networks the Prometheus metrics view answers, matched against REMOTE_ADDR
    # (the connection's peer, never a forwarded header); others get a 403. Scrapers sit
    # on loopback or a private network; behind a proxy on one, every request comes from
    # the proxy: mount ratelimits.urls.metrics where the proxy does not forward, or list
    # only the scraper. ["0.0.0.0/0", "::/0"] answers everyone, [] no one.
    "METRICS_ALLOWED_NETWORKS": [
        "127.0.0.0/8",
        "::1/128",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "fc00::/7",
    ],
    # How ratelimits.contrib.django_ratelimit.ratelimit(block=True) blocks: "429" answers
    # as ratelimits' other faces do; "raise" raises django-ratelimit's Ratelimited (a
    # PermissionDenied: a 403, or its RATELIMIT_VIEW under its middleware).
    "DJANGO_RATELIMIT_BLOCK": "429",
    # Keep a record of every sign-in attempt (username as typed, address, user agent,
    # path, result) in the SignInAttempt model, written by a thread of each process, never
    # while the request waits. None (unset): off, and check ratelimits.I023 suggests it
    # where RateLimitBackend is installed; False: off, quietly.
    "SIGN_IN_AUDIT": None,
    # Days a sign-in record is kept; `ratelimits audit-cleanup` deletes older ones.
    "SIGN_IN_AUDIT_RETENTION": 90,
    # Seconds between a worker's writes of its sign-in records (sooner with 500 waiting).
    "SIGN_IN_AUDIT_FLUSH_INTERVAL": 2.0,
    # Write usernames in the log's sign-in lines; False: their hashed identity (n:<hex>).
    "SIGN_IN_LOG_USERNAMES": True,
    # Dotted path of a callable (request, credentials) -> the username of the account the
    # sign-in's credentials name, or None: a per-username policy then counts that account
    # whichever name the site's lookup accepted (an e-mail or a username). None: the
    # attempted username, folded as wide as case- and accent-insensitive lookups.
    "SIGN_IN_ACCOUNT": None,
}


class AppSettings:
    """Attribute access to ``settings.RATELIMITS`` merged over :data:`DEFAULTS`.

    A value read once is kept as an instance attribute, so the request path reads
    settings as plain attributes; a change of ``RATELIMITS`` forgets them all."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Unknown ratelimits setting: {name!r}")
        value = _merged()[name]
        self.__dict__[name] = value
        return value

    def as_dict(self) -> dict[str, Any]:
        """Every setting with its effective value."""
        return dict(_merged())


@functools.cache
def _merged() -> dict[str, Any]:
    user = getattr(settings, "RATELIMITS", None) or {}
    return {**DEFAULTS, **{k: v for k, v in user.items() if k in DEFAULTS}}


def user_settings() -> dict[str, Any]:
    """The raw ``RATELIMITS`` dict as the project wrote it (for system checks)."""
    value = getattr(settings, "RATELIMITS", None)
    return value if isinstance(value, dict) else {}


app_settings = AppSettings()


#: Pass to :func:`resets_on_setting_change` for a cache that a change of any setting
#: may make wrong (a compiled query, a policy compiled with ``TIME_ZONE``).
ANY_SETTING = "*"

Reset = TypeVar("Reset", bound=Callable[[], object])


@dataclass(frozen=True)
class _Registered:
    """A registered reset: the function, and the settings a change of which calls it
    (``None``: none, only :func:`reset_registered` does)."""

    reset: Callable[[], object]
    settings: frozenset[str] | None

    def follows(self, setting: str) -> bool:
        return self.settings is not None and (
            setting in self.settings or ANY_SETTING in self.settings
        )


#: The registered resets, each once, in the order their modules were imported.
_registered: dict[Callable[[], object], _Registered] = {}


def _register(reset: Reset, settings: frozenset[str] | None) -> Reset:
    _registered[reset] = _Registered(reset, settings)
    return reset


def resets_on_setting_change(*settings: str) -> Callable[[Reset], Reset]:
    """Register the decorated function (no arguments) as the reset of a cache built from
    ``settings`` (Django setting names, such as ``"RATELIMITS"``, ``"CACHES"``,
    ``"SECRET_KEY"``; :data:`ANY_SETTING` for any): it is called when one of them
    changes, and by :func:`reset_registered`. Returns the function unchanged::

        @resets_on_setting_change("RATELIMITS")
        def _forget_networks() -> None:
            networks.cache_clear()
    """
    if not settings or not all(isinstance(name, str) and name for name in settings):
        raise TypeError("resets_on_setting_change() needs the names of the settings")
    names = frozenset(settings)

    def register(reset: Reset) -> Reset:
        return _register(reset, names)

    return register


def resets_process_state(reset: Reset) -> Reset:
    """Register ``reset`` (no arguments) as the reset of per-process state no setting
    builds (a breaker, a buffer of unsent counts): :func:`reset_registered` calls it, a
    setting change does not. Returns it unchanged; use it as a decorator, or call it on a
    bound method (``resets_process_state(shadow_log.reset)``)."""
    return _register(reset, None)


def registered_resets(settings: Iterable[str] | None = None) -> list[Callable[[], object]]:
    """The registered resets, in the order they are called (the reverse of registration:
    a module is imported after those it uses, so it is reset before them). ``settings``:
    only those a change of one of these settings calls; ``None``: all."""
    entries = list(_registered.values())[::-1]
    if settings is None:
        return [entry.reset for entry in entries]
    changed = list(settings)
    return [entry.reset for entry in entries if any(entry.follows(name) for name in changed)]


def _forget_settings() -> None:
    _merged.cache_clear()
    app_settings.__dict__.clear()


def reset_registered() -> None:
    """Forget the settings read and call every registered reset: the process's state is
    then the one a fresh worker has (``ratelimits.testutils.reset_state``)."""
    _forget_settings()
    for reset in registered_resets():
        reset()


@receiver(setting_changed, dispatch_uid="ratelimits.conf")
def _on_setting_change(*, setting: str, **kwargs: Any) -> None:
    """The app's one ``setting_changed`` receiver: forget the settings read, then call the
    resets registered for ``setting``."""
    if setting == "RATELIMITS":
        _forget_settings()
    for reset in registered_resets([setting]):
        reset()
