"""Internal, not part of the public API (see docs/api.md).

The admin face: policies with live usage (:mod:`~.policy`) and their overrides
(:mod:`~.overrides`), and the dashboard (:mod:`~.dashboard`, :mod:`~.chart`); :mod:`~.forms`,
:mod:`~.actions`, :mod:`~.changelist`, :mod:`~.widgets` and :mod:`~.usage` serve the policy
pages; the sign-in audit trail (:mod:`~.sign_in_attempts`). Importing this package registers
the model admins."""

from ratelimits.admin.dashboard import DashboardAdmin
from ratelimits.admin.overrides import PolicyOverrideInline
from ratelimits.admin.policy import PolicyAdmin
from ratelimits.admin.sign_in_attempts import SignInAttemptAdmin

__all__ = ["DashboardAdmin", "PolicyAdmin", "PolicyOverrideInline", "SignInAttemptAdmin"]
