"""The app's own exceptions."""


class RateLimitsError(Exception):
    """Base class of the errors ratelimits raises."""


class ConfigurationError(RateLimitsError):
    """The ``RATELIMITS`` setting or the cache it names cannot be used."""


class RedisUnavailable(RateLimitsError):
    """Redis could not answer; the original redis-py error is the ``__cause__``."""
