from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class RateLimitsConfig(AppConfig):
    name = "ratelimits"
    label = "ratelimits"
    verbose_name = "Rate limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ratelimits import checks  # noqa: F401 - registers the system checks
        from ratelimits.models import Policy
        from ratelimits.signals import on_policy_saved_or_deleted

        post_save.connect(
            on_policy_saved_or_deleted, sender=Policy, dispatch_uid="ratelimits.saved"
        )
        post_delete.connect(
            on_policy_saved_or_deleted, sender=Policy, dispatch_uid="ratelimits.deleted"
        )
