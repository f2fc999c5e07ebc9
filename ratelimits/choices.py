"""Internal, not part of the public API (see docs/api.md).

The choices of the policy model's fields."""

from __future__ import annotations

from django.db import models

from ratelimits.engine.algorithms import ALGORITHMS

#: The model's choice of algorithm, from the registry of
#: :mod:`ratelimits.engine.algorithms` (whose entries are ``Algorithm``):
#: ``AlgorithmChoice.TOKEN_BUCKET`` is ``"token_bucket"``, labelled as the admin shows it.
AlgorithmChoice = models.TextChoices(  # type: ignore[misc]
    "AlgorithmChoice", [(a.name.upper(), (a.name, a.label)) for a in ALGORITHMS]
)


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
    """A policy's own mode (``Policy.mode``); the switch for every policy at once is the
    global mode, ``RATELIMITS["MODE"]`` (:mod:`ratelimits.engine.global_mode`)."""

    ENFORCE = "enforce", "Enforce (deny over the limit)"
    SHADOW = "shadow", "Shadow (log would-be denials, let requests pass)"
