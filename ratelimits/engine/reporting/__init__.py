"""What the engine tells about its decisions: the observers of each decision
(:mod:`~.observers`), the dashboard's per-minute counts (:mod:`~.stats`), the request
that nears a limit (:mod:`~.near_limit`) and shadow mode's log (:mod:`~.shadow_log`)."""
