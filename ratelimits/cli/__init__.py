"""Internal, not part of the public API (see docs/api.md).

The pieces of ``manage.py ratelimits``: one module per subcommand (``policies``,
``export`` and ``import`` share one), each declaring its :class:`~.subcommand.Subcommand`
(``SUBCOMMAND``: its help, its ``add_arguments`` beside its ``run_*`` body), and what they
share: :mod:`~.subcommand` (the arguments several take), :mod:`~.records` (``--json``),
:mod:`~.output` (tables), :mod:`~.common` (finding a policy, reading an identity),
:mod:`~.identities`, :mod:`~.prompt`.

Each ``run_*`` function takes the command (for its ``stdout``/``stderr``) and the
parsed options. They talk to Redis only through the engine and the shared tools
(:mod:`ratelimits.tools.inventory`, :mod:`ratelimits.tools.inspection`,
:mod:`ratelimits.engine.limiter`).
"""
