"""Internal, not part of the public API (see docs/api.md).

The database side of the policies: the policy table loaded from the models
(:mod:`~ratelimits.database.policy_source`), the model receivers that notice a change
(:mod:`~ratelimits.database.receivers`), and its announcement to every worker once the
transaction commits (:mod:`~ratelimits.database.announcements`)."""
