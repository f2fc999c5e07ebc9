"""Internal, not part of the public API (see docs/api.md).

Real, throw-away Redis servers and a clean process state for tests, one module a job:
:mod:`.binaries` finds the server binaries, :mod:`.processes` runs a server process,
:mod:`.server`, :mod:`.sentinel` and :mod:`.cluster` start one server, a Sentinel and a
Cluster, :mod:`.slots` moves a cluster's slots, :mod:`.state` forgets the app's
per-process caches, :mod:`.modes` sets ``RATELIMITS["MODE"]`` for a test. Users import
them from :mod:`ratelimits.testutils`.
"""
