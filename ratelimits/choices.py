"""The choices of the policy model's fields."""

from __future__ import annotations

from django.db import models


class Algorithm(models.TextChoices):
    SLIDING_LOG = "sliding_log", "Sliding window log (exact)"
    COMPACT_LOG = "compact_log", "Compact sliding window log (exact, 8 B per request)"
    SLIDING_COUNTER = "sliding_counter", "Sliding window counter (approximate, small)"
    FIXED_WINDOW = "fixed_window", "Fixed window"
    TOKEN_BUCKET = "token_bucket", "Token bucket (GCRA: a steady rate with bursts)"
    CONCURRENCY = "concurrency", "Concurrency (requests in progress at once)"


class Counts(models.TextChoices):
    ALL = "all", "Every admitted request"
    FAILURES = "failures", "Failures only (the response's status is 400 or more)"
    SUCCESSES = "successes", "Successes only (the response's status is below 400)"
    SIGN_IN_FAILURES = "sign_in_failures", "Failed sign-ins (each failed authenticate())"


class Calendar(models.TextChoices):
    ROLLING = "", "Rolling window (the window in seconds)"
    DAY = "day", "Calendar day (from midnight)"
    WEEK = "week", "Calendar week (from Monday, midnight)"
    MONTH = "month", "Calendar month (from the 1st, midnight)"


class Mode(models.TextChoices):
    ENFORCE = "enforce", "Enforce (deny over the limit)"
    SHADOW = "shadow", "Shadow (log would-be denials, let requests pass)"
