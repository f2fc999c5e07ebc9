"""The app's own exceptions."""

__all__ = ["ConfigurationError", "MissingExtra", "RateLimitsError", "RedisUnavailable", "Throttled"]


class RateLimitsError(Exception):
    """Base class of the errors ratelimits raises."""


class ConfigurationError(RateLimitsError):
    """The ``RATELIMITS`` setting or the cache it names cannot be used."""


class RedisUnavailable(RateLimitsError):
    """Redis could not answer; the original redis-py error is the ``__cause__``."""


class Throttled(RateLimitsError):
    """A request a policy denied: what the ``THROTTLED_VIEW`` receives as ``exception``.

    ``verdict`` is the :class:`~ratelimits.engine.decision.Verdict`; ``retry_after`` the
    whole seconds, rounded up, until the client may try again (``Retry-After``).
    """

    def __init__(self, verdict: object, retry_after: int) -> None:
        super().__init__(f"Too many requests: try again in {retry_after} seconds.")
        self.verdict = verdict
        self.retry_after = retry_after


class MissingExtra(RateLimitsError, ImportError):
    """A feature needs a package that only one of the distribution's extras installs."""

    def __init__(self, feature: str, package: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs {package}, which is not installed: "
            f'pip install "django-ratelimits[{extra}]"'
        )
        self.extra = extra
