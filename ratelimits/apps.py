"""Internal, not part of the public API (see docs/api.md).

The app's configuration: its ``ready()`` is the composition root that wires the
database, the engine, the checks and Prometheus together.
"""

from importlib.util import find_spec

from django.apps import AppConfig


class RateLimitsConfig(AppConfig):
    name = "ratelimits"
    label = "ratelimits"
    verbose_name = "Rate limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the checks, load the policy table from the database, announce policy
        changes, record sign-in attempts, keep ``login()`` working beside the sign-in
        backend and lift lockouts on a new password (:func:`ratelimits.backends.connect`),
        and count decisions for Prometheus (with the ``prometheus`` extra)."""
        from ratelimits import (
            backends,
            checks,  # noqa: F401 - registers the system checks
        )
        from ratelimits.database import policy_source, receivers
        from ratelimits.engine.reporting import observers as reporting
        from ratelimits.engine.table import current as table
        from ratelimits.http import sign_in_audit

        table.set_source(policy_source.load, release=policy_source.close_connections)
        receivers.connect()
        backends.connect()
        sign_in_audit.connect()
        if find_spec("prometheus_client") is not None:
            from ratelimits import prometheus

            reporting.add_observer(prometheus.observe)
