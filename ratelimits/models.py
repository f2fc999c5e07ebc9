"""The policy model: one row per rate limit that operators edit in the admin."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from ratelimits import validators
from ratelimits.choices import AlgorithmChoice, Calendar, Counts, Mode
from ratelimits.constraints import OVERRIDE_CONSTRAINTS, POLICY_CONSTRAINTS
from ratelimits.engine import algorithms
from ratelimits.engine.keys import kinds
from ratelimits.engine.policy import override_identity, rules
from ratelimits.engine.policy.describe import describe_rate
from ratelimits.engine.policy.periods import NOMINAL_WINDOW
from ratelimits.engine.policy.spec import PolicySpec
from ratelimits.help_texts import OVERRIDE_HELP, POLICY_HELP
from ratelimits.querysets import AnnouncingQuerySet

__all__ = ["Policy", "PolicyOverride", "SignInAttempt"]


class Policy(models.Model):
    """A rate limit on the requests that match ``endpoint`` (and ``methods``)."""

    name = models.SlugField(max_length=64, unique=True, help_text=POLICY_HELP["name"])
    endpoint = models.CharField(
        max_length=1000,
        validators=[validators.validate_endpoint],
        help_text=POLICY_HELP["endpoint"],
    )
    methods = models.CharField(
        max_length=80,
        blank=True,
        validators=[validators.validate_methods],
        help_text=POLICY_HELP["methods"],
    )
    algorithm = models.CharField(
        max_length=20, choices=AlgorithmChoice.choices, default=algorithms.DEFAULT
    )
    limit = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=POLICY_HELP["limit"],
    )
    window = models.PositiveIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_WINDOW)],
        help_text=POLICY_HELP["window"],
    )
    calendar = models.CharField(
        max_length=8,
        blank=True,
        default=Calendar.ROLLING,
        choices=Calendar.choices,
        help_text=POLICY_HELP["calendar"],
    )
    time_zone = models.CharField(
        max_length=64,
        blank=True,
        validators=[validators.validate_time_zone],
        help_text=POLICY_HELP["time_zone"],
    )
    lockout = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(validators.MAX_LOCKOUT)],
        help_text=POLICY_HELP["lockout"],
    )
    lockout_until_lifted = models.BooleanField(
        default=False, help_text=POLICY_HELP["lockout_until_lifted"]
    )
    extend_lockout = models.BooleanField(default=False, help_text=POLICY_HELP["extend_lockout"])
    reset_on_success = models.BooleanField(default=False, help_text=POLICY_HELP["reset_on_success"])
    key = models.CharField(
        max_length=80,
        default="user_or_ip",
        validators=[kinds.validate_key],
        help_text=POLICY_HELP["key"],
    )
    ipv6_prefix = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(validators.MIN_IPV6_PREFIX),
            MaxValueValidator(validators.MAX_IPV6_PREFIX),
        ],
        help_text=POLICY_HELP["ipv6_prefix"],
    )
    shards = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_SHARDS)],
        help_text=POLICY_HELP["shards"],
    )
    burst = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=POLICY_HELP["burst"],
    )
    cost = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=POLICY_HELP["cost"],
    )
    counts = models.CharField(
        max_length=20,
        choices=Counts.choices,
        default=Counts.ALL,
        help_text=POLICY_HELP["counts"],
    )
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.ENFORCE)
    fail_open = models.BooleanField(default=True, help_text=POLICY_HELP["fail_open"])
    traffic = models.BooleanField("record traffic", default=True, help_text=POLICY_HELP["traffic"])
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
            lockout_until_lifted=self.lockout_until_lifted,
            extend_lockout=self.extend_lockout,
            reset_on_success=self.reset_on_success,
        )
        if problem is not None:
            raise ValidationError({problem.field: problem.message})

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The same normal form whether the row comes from a form, the ORM or an import.
        self.normalize()
        super().save(*args, **kwargs)

    @property
    def spec(self) -> PolicySpec:
        """This row's fields as the engine compiles them."""
        return PolicySpec.of(self)

    @property
    def rate_display(self) -> str:
        """The rate as :func:`~ratelimits.engine.policy.describe.describe_rate` words it."""
        return describe_rate(self)


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
        help_text=OVERRIDE_HELP["user"],
    )
    group = models.ForeignKey(
        "auth.Group",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text=OVERRIDE_HELP["group"],
    )
    identity = models.CharField(max_length=80, blank=True, help_text=OVERRIDE_HELP["identity"])
    limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(validators.MAX_LIMIT)],
        help_text=OVERRIDE_HELP["limit"],
    )
    exempt = models.BooleanField(default=False, help_text=OVERRIDE_HELP["exempt"])
    comment = models.CharField(max_length=200, blank=True, help_text=OVERRIDE_HELP["comment"])
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
        if self.limit == 0:
            return "blocked"
        plain = dict(limit=self.limit, burst=None, cost=1, counts="all", lockout=0)
        return describe_rate(replace(PolicySpec.of(policy), **plain))

    def normalize(self) -> None:
        """Store the identity in its matched form: addresses normalised, API keys hashed.
        A value that names nothing is left as typed, for :meth:`clean` to refuse."""
        policy = self._policy()
        if self.identity and policy is not None:
            with contextlib.suppress(ValueError):
                self.identity = override_identity.normalize(self.identity, policy.key)

    def clean(self) -> None:
        super().clean()
        targets = [self.user_id is not None, self.group_id is not None, bool(self.identity)]
        problems = [rules.target_problem(sum(targets))]
        policy = self._policy()
        if self.identity and policy is not None:
            try:
                self.identity = override_identity.normalize(self.identity, policy.key)
            except ValueError as e:
                problems.append(rules.Problem("identity", str(e)))
        if policy is not None:
            problems.append(rules.anon_target_problem(policy.key, any(targets[:2])))
        problems.append(rules.exempt_problem(self.exempt, self.limit))
        if any(problems):
            raise ValidationError({p.field: p.message for p in problems if p is not None})

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


class SignInAttempt(models.Model):
    """One sign-in attempt of the audit trail (``RATELIMITS["SIGN_IN_AUDIT"]``): who typed
    which username, from where, and what came of it. Written in batches by a thread of each
    process, never while the request waits (:mod:`ratelimits.database.sign_in_records`);
    kept ``SIGN_IN_AUDIT_RETENTION`` days (``manage.py ratelimits audit-cleanup``)."""

    class Result(models.TextChoices):
        FAILED = "failed", "Failed (wrong credentials)"
        REFUSED = "refused", "Refused (over a sign-in policy's limit, or locked out)"
        SUCCEEDED = "succeeded", "Succeeded"

    #: Longest text kept of each field (longer values are cut).
    USERNAME_LENGTH, USER_AGENT_LENGTH, PATH_LENGTH = 255, 512, 512

    when = models.DateTimeField(db_index=True, help_text="When the attempt was made.")
    username = models.CharField(
        max_length=USERNAME_LENGTH, blank=True, help_text="The username as it was typed."
    )
    address = models.CharField(
        max_length=64, blank=True, help_text="The client's address behind the trusted proxies."
    )
    user_agent = models.CharField(max_length=USER_AGENT_LENGTH, blank=True)
    path = models.CharField(max_length=PATH_LENGTH, blank=True)
    result = models.CharField(max_length=9, choices=Result.choices)
    policy = models.CharField(
        max_length=64, blank=True, help_text="The sign-in policy that refused the attempt."
    )

    class Meta:
        ordering = ["-when", "-pk"]
        verbose_name = "sign-in attempt"
        indexes = [
            models.Index(fields=["username", "when"], name="ratelimits_attempt_username"),
            models.Index(fields=["address", "when"], name="ratelimits_attempt_address"),
        ]

    def __str__(self) -> str:
        return f"{self.get_result_display()}: {self.username or '-'} from {self.address or '-'}"
