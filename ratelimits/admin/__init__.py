"""Internal, not part of the public API (see docs/api.md).

The admin face: policies with live usage (:mod:`~.policy`) and their overrides
(:mod:`~.overrides`), and the dashboard (:mod:`~.dashboard`, :mod:`~.chart`); :mod:`~.forms`,
:mod:`~.actions`, :mod:`~.changelist`, :mod:`~.widgets` and :mod:`~.usage` serve the policy
pages. Importing this package registers both model admins."""

from ratelimits.admin.dashboard import DashboardAdmin
from ratelimits.admin.overrides import PolicyOverrideInline
from ratelimits.admin.policy import PolicyAdmin

__all__ = ["DashboardAdmin", "PolicyAdmin", "PolicyOverrideInline"]
