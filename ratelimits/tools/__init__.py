"""Internal, not part of the public API (see docs/api.md).

What the admin and the ``ratelimits`` command share: finding and reading keys in Redis
(:mod:`~.inventory`, :mod:`~.inspection`), policy files (:mod:`~.policy_files`), identities as
a person types them (:mod:`~.identities`), endpoint suggestions and the endpoints that
match nothing (:mod:`~.endpoints`) and memory estimates (:mod:`~.memory`, from the figures
of :mod:`~.measured`); and, for the admin alone, the dashboard's per-minute counts read
back from Redis (:mod:`~.stats_reading`)."""
