"""Internal, not part of the public API (see docs/api.md).

The policy models' migrations.
"""
