"""The policy model: one row per rate limit that operators edit in the admin."""

from __future__ import annotations

import contextlib
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from ratelimits import validators
from ratelimits.choices import Algorithm, Calendar, Counts, Mode
from ratelimits.constraints import OVERRIDE_CONSTRAINTS, POLICY_CONSTRAINTS
from ratelimits.engine import algorithms, override_identity, rules
from ratelimits.engine.describe import describe_rate
from ratelimits.engine.periods import NOMINAL_WINDOW
from ratelimits.querysets import AnnouncingQuerySet


class Policy(models.Model):
    """A rate limit on the requests that match ``endpoint`` (and ``methods``)."""

    name = models.SlugField(
        max_length=64,
        unique=True,
        help_text="Unique short name; it appears in Redis keys and response headers.",
    )
    endpoint = models.CharField(
        max_length=200,
        validators=[validators.validate_endpoint],
        help_text=(
            "What the policy matches: a DRF throttle_scope (search), a URL name "
            "(api:search) or a path glob starting with / or * (/api/search/*)."
        ),
    )
    methods = models.CharField(
        max_length=80,
        blank=True,
        validators=[validators.validate_methods],
        help_text="Comma-separated HTTP methods (GET,POST). Blank matches every method.",
    )
    algorithm = models.CharField(
        max_length=20, choices=Algorithm.choices, default=algorithms.DEFAULT
    )
    limit = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=(
            "Requests allowed per window (1 to 2147483647); for concurrency, requests in "
            "progress at once."
        ),
    )
    window = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_WINDOW)],
        help_text=(
            "Window length in seconds (1 s to 30 days); for concurrency, the lease: a "
            "request's slot frees itself after it even if its response never ends. With a "
            "calendar period it is set for you (the period's nominal length)."
        ),
    )
    calendar = models.CharField(
        max_length=8,
        blank=True,
        default=Calendar.ROLLING,
        choices=Calendar.choices,
        help_text=(
            "fixed_window only: count per calendar day, week or month of the time zone, "
            "resetting at its local midnight (a quota: 10,000 per calendar month). Blank: "
            "the rolling window."
        ),
    )
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        validators=[validators.validate_time_zone],
        help_text=(
            "The calendar period's IANA time zone (Europe/Berlin). Blank: the site's "
            "TIME_ZONE. Only for a calendar period."
        ),
    )
    lockout = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(validators.MAX_LOCKOUT)],
        help_text=(
            "Seconds a client is locked out after its first denied request: every request "
            "is denied until then, whatever the window allows (a sign-in form: 900). 0: "
            "no lockout. Not for concurrency or a sharded policy."
        ),
    )
    key = models.CharField(
        max_length=80,
        default="user_or_ip",
        validators=[validators.validate_key],
        help_text=(
            "Who is counted: user, ip, user_or_ip, global, header:NAME (header:X-Api-Key), "
            "or username (the username a sign-in attempts; failed sign-ins only). A client "
            "can send any header value it likes: a header key counts per value only "
            "behind a gateway that sets the header itself."
        ),
    )
    ipv6_prefix = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(validators.MIN_IPV6_PREFIX),
            MaxValueValidator(validators.MAX_IPV6_PREFIX),
        ],
        help_text=(
            "IPv6 clients are counted per network of this prefix length (48: one counter "
            "per /48, which one customer of a hosting provider often holds; 128: per "
            "address). Blank: the IPV6_PREFIX setting (64)."
        ),
    )
    shards = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_SHARDS)],
        help_text=(
            "Split the limit over this many Redis keys (1 to 64, at most the limit), for a "
            "hot key such as a global policy on a busy endpoint: each request counts in one "
            "shard chosen at random, each shard admits its share of the limit. Never admits "
            "more than the limit; can deny while another shard still has room."
        ),
    )
    burst = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=(
            "token_bucket only: how many requests may come at once (1 to 2147483647); "
            "the limit per window is the steady rate after them. Blank: the limit."
        ),
    )
    cost = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=(
            "Units one request spends (1 to 2147483647; a view's ratelimit_cost replaces "
            "it). A request costing more than the policy can ever grant is always denied."
        ),
    )
    counts = models.CharField(
        max_length=20,
        choices=Counts.choices,
        default=Counts.ALL,
        help_text=(
            "Which responses spend: a request spends when admitted and gets its units back "
            "after a response that does not count. Failures only suits an API's "
            "authentication; failed sign-ins counts each failed authenticate(), as "
            "RateLimitBackend sees it, whatever the response. A concurrency policy gives "
            "every slot back: all."
        ),
    )
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.ENFORCE)
    fail_open = models.BooleanField(
        default=True,
        help_text="When Redis cannot answer: let requests through (checked) or deny them.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = AnnouncingQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = "rate limit policy"
        verbose_name_plural = "rate limit policies"
        permissions = [("reset_counters", "Can reset rate-limit counters")]
        constraints = POLICY_CONSTRAINTS

    def __str__(self) -> str:
        return self.name

    def normalize(self) -> None:
        """Strip the endpoint and write methods as ``GET,POST``; bad values are left as given
        for the field validators and database constraints to refuse."""
        self.endpoint = (self.endpoint or "").strip()
        with contextlib.suppress(ValidationError):
            self.methods = validators.normalize_methods(self.methods)
        self.time_zone = (self.time_zone or "").strip()
        if self.calendar in NOMINAL_WINDOW:  # the period's length, for what reads window
            self.window = NOMINAL_WINDOW[self.calendar]

    def clean_fields(self, exclude: Any = None) -> None:
        self.normalize()
        super().clean_fields(exclude=exclude)

    def clean(self) -> None:
        super().clean()
        problem = rules.first_problem(
            algorithm=self.algorithm,
            limit=self.limit,
            shards=self.shards,
            burst=self.burst,
            counts=self.counts,
            calendar=self.calendar,
            time_zone=self.time_zone,
            lockout=self.lockout,
            key=self.key,
        )
        if problem is not None:
            raise ValidationError({problem.field: problem.message})

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The same normal form whether the row comes from a form, the ORM or an import.
        self.normalize()
        super().save(*args, **kwargs)

    @property
    def rate_display(self) -> str:
        """The rate as :func:`~ratelimits.engine.policy.describe_rate` words it."""
        return describe_rate(
            self.limit,
            self.window,
            self.algorithm,
            self.burst,
            self.cost,
            self.counts,
            calendar=self.calendar,
            time_zone=self.calendar and rules.calendar_zone(self.time_zone),
            lockout=self.lockout or 0,
        )


class PolicyOverride(models.Model):
    """A different limit, or an exemption, for one client of a policy.

    Names exactly one of a user, a group or an identity (an IP address or network, an
    API key for a ``header:NAME`` policy, or an API client, ``auth:<name>``, for a
    ``user`` or ``user_or_ip`` policy; keys stored hashed). The most specific override that
    names a request's client wins: user, then group, then identity, then the policy.
    """

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="overrides")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="This user, whatever the policy counts them by.",
    )
    group = models.ForeignKey(
        "auth.Group",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Every member of this group (a user in several gets the most generous).",
    )
    identity = models.CharField(
        max_length=80,
        blank=True,
        help_text=(
            "An IP address or network (203.0.113.7, 10.0.0.0/8); for a policy keyed by "
            "header:NAME the header's value (an API key); for one keyed by user or "
            "user_or_ip, auth:<name> of an API client that is not a user. Keys are stored "
            "hashed, never shown again."
        ),
    )
    limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=(
            "Requests allowed per window for them (the policy's window); for a concurrency "
            "policy, their requests in progress at once. Blank if exempt."
        ),
    )
    exempt = models.BooleanField(default=False, help_text="Never limit them under this policy.")
    comment = models.CharField(max_length=200, blank=True, help_text="Why (a plan, a ticket).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = AnnouncingQuerySet.as_manager()

    class Meta:
        ordering = ["policy", "id"]
        verbose_name = "override"
        constraints = OVERRIDE_CONSTRAINTS

    def __str__(self) -> str:
        return f"{self.target_display}: {self.rate_display}"

    @property
    def target_display(self) -> str:
        """Who: ``user alice``, ``group partners``, ``10.0.0.0/8``, ``API key (hashed …)``."""
        if self.user_id is not None:
            return f"user {self.user}"
        if self.group_id is not None:
            return f"group {self.group}"
        return override_identity.describe(self.identity)

    @property
    def rate_display(self) -> str:
        """``"exempt"``, ``"50 per 60 s"``, or for a concurrency policy ``"3 at once, lease
        60 s"``."""
        if self.policy_id is None and not self.exempt:
            return f"{self.limit} per ? s"
        return self.rate_under(self.policy)

    def rate_under(self, policy: Policy) -> str:
        """:attr:`rate_display` at ``policy``'s window and algorithm (an import's version
        of this override's policy, say)."""
        if self.exempt:
            return "exempt"
        calendar = getattr(policy, "calendar", "")
        return describe_rate(
            self.limit,
            policy.window,
            policy.algorithm,
            calendar=calendar,
            time_zone=calendar and rules.calendar_zone(policy.time_zone),
        )

    def normalize(self) -> None:
        """Store the identity in its matched form: addresses normalised, API keys hashed.
        A value that names nothing is left as typed, for :meth:`clean` to refuse."""
        policy = self._policy()
        if self.identity and policy is not None:
            with contextlib.suppress(ValueError):
                self.identity = override_identity.normalize(self.identity, policy.key)

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        targets = [self.user_id is not None, self.group_id is not None, bool(self.identity)]
        if sum(targets) != 1:
            errors["__all__"] = "Name exactly one of a user, a group or an identity."
        policy = self._policy()
        if self.identity and policy is not None:
            try:
                self.identity = override_identity.normalize(self.identity, policy.key)
            except ValueError as e:
                errors["identity"] = str(e)
        if self.exempt and self.limit is not None:
            errors["limit"] = "Leave the limit blank for an exempt override."
        elif not self.exempt and self.limit is None:
            errors["limit"] = "Give a limit, or tick exempt."
        if errors:
            raise ValidationError(errors)

    def _policy(self) -> Policy | None:
        """The policy, saved or not yet (an inline on the add page); ``None`` when unset."""
        try:
            return self.policy
        except Policy.DoesNotExist:
            return None

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Hashing here too keeps a secret out of the table whichever way the row arrives.
        self.normalize()
        super().save(*args, **kwargs)


class Dashboard(Policy):
    """The admin dashboard's entry in the admin index (no table, no permissions of its
    own: who may view policies may view the dashboard)."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = verbose_name_plural = "dashboard"
