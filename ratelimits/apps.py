from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed, post_delete, post_save


class RateLimitsConfig(AppConfig):
    name = "ratelimits"
    label = "ratelimits"
    verbose_name = "Rate limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ratelimits import checks  # noqa: F401 - registers the system checks
        from ratelimits.models import Policy, PolicyOverride
        from ratelimits.signals import on_group_membership_changed, on_policy_saved_or_deleted

        for model in (Policy, PolicyOverride):
            post_save.connect(
                on_policy_saved_or_deleted, sender=model, dispatch_uid=f"ratelimits.saved.{model}"
            )
            post_delete.connect(
                on_policy_saved_or_deleted,
                sender=model,
                dispatch_uid=f"ratelimits.deleted.{model}",
            )
        groups = getattr(get_user_model(), "groups", None)
        if groups is not None:  # a custom user model may have no groups
            m2m_changed.connect(
                on_group_membership_changed,
                sender=groups.through,
                dispatch_uid="ratelimits.group_membership",
            )
