"""The admin face: policies with their overrides and live usage (:mod:`~.policy`), and the
dashboard (:mod:`~.dashboard`, :mod:`~.chart`); :mod:`~.widgets` and :mod:`~.usage` serve
the policy page. Importing this package registers both model admins."""

from ratelimits.admin.dashboard import DashboardAdmin
from ratelimits.admin.policy import PolicyAdmin, PolicyOverrideInline

__all__ = ["DashboardAdmin", "PolicyAdmin", "PolicyOverrideInline"]
