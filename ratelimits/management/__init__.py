"""Internal, not part of the public API (see docs/api.md).

The ``ratelimits`` management command (:mod:`.commands.ratelimits`), whose pieces
live in :mod:`ratelimits.cli`; its use is documented in docs/command.md.
"""
