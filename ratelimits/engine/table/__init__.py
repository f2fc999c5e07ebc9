"""This process's policy table: the index of which policies match a request
(:mod:`~.policy_table`, with :mod:`~.globs`), kept current (:mod:`~.current`) by
background builds (:mod:`~.builds`, :mod:`~.keeper`, :mod:`~.pacing`) that the version
stamp in Redis (:mod:`~.version`) triggers, held in one place (:mod:`~.cache`)."""
