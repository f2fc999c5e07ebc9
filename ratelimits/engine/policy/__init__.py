"""A policy as the hot path needs it: compiled once from its fields (:mod:`~.compiling`,
checked by :mod:`~.rules` and :mod:`~.refusals`), with its overrides, its calendar
periods, its script arguments and its rate in words."""
