"""Internal, not part of the public API (see docs/api.md).

The engine: (policies, identities) -> decisions, in one Redis call per request. Free of
DRF, django-ninja, the admin, HTTP requests and the command; the faces
(:mod:`ratelimits.throttling`, :mod:`ratelimits.middleware`, :mod:`ratelimits.decorators`,
:mod:`ratelimits.contrib.ninja`, the admin, the ``ratelimits`` command, Prometheus) sit
on top.

Its folders are its jobs: ``store/`` (the Redis client, its circuit breakers, the Lua
files), ``keys/`` (key names, who is counted), ``policy/`` (a policy as the hot path
needs it, its overrides), ``table/`` (this process's policy table, kept current),
``reporting/`` (counting outcomes); at the top, the call itself: :mod:`~.limiter`
(``decide``, ``adecide``, ``peek``, ``give_back``) and the modules it runs through.

This package re-exports nothing: import each name from the module that defines it
(``ratelimits.engine.limiter.decide``, ``ratelimits.engine.decision.Decision``...).
"""
