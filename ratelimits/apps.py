from django.apps import AppConfig


class RateLimitsConfig(AppConfig):
    name = "ratelimits"
    label = "ratelimits"
    verbose_name = "Rate limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the checks, load the policy table from the database, announce policy
        changes, and count decisions for Prometheus."""
        from ratelimits import (
            checks,  # noqa: F401 - registers the system checks
            policy_source,
            prometheus,
            receivers,
        )
        from ratelimits.engine import reporting, table

        table.set_source(policy_source.load, release=policy_source.close_connections)
        receivers.connect()
        reporting.add_observer(prometheus.observe)
