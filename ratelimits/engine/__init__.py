"""The engine: (policies, identities) -> decisions, in one Redis call per request.

Everything here is free of DRF, django-ninja, the admin, HTTP requests and the command;
the faces (:mod:`ratelimits.throttling`, :mod:`ratelimits.middleware`,
:mod:`ratelimits.decorators`, :mod:`ratelimits.contrib.ninja`, the admin, the
``ratelimits`` command, Prometheus) sit on top. The entry points, importable from here:

- :func:`decide` decides one request's :class:`Check`\\ s, all or nothing, and records
  them; :func:`adecide` is its twin for coroutines; :func:`peek` looks without
  recording. They return a :class:`Verdict` of :class:`Decision`\\ s.
- :func:`give_back` returns, after the response, what a verdict's :class:`Receipt`
  holds that the response does not keep (concurrency slots, units of a policy that
  counts only failures or successes).
- :func:`get_table` is this process's policy table (:class:`PolicyTable`, of
  :class:`CompiledPolicy`), reloaded when a change is announced; :func:`aget_table`
  returns it from a coroutine.

The modules, bottom up: ``store/`` (the Redis client, its circuit breakers, the Lua
files), :mod:`~.keys` and :mod:`~.identity` (key names, who is counted),
:mod:`~.override_identity`, :mod:`~.policy` and :mod:`~.overrides` (a policy as the hot
path needs it), :mod:`~.table` (matching), :mod:`~.denials` (floods answered in the
worker), :mod:`~.stats` and :mod:`~.reporting` (counting outcomes), :mod:`~.receipt`
(what a response may give back), :mod:`~.limiter` (the calls). Modules inside the
engine import each other by their full path, never through this package.
"""

from ratelimits.engine.decision import Decision, Verdict
from ratelimits.engine.limiter import adecide, decide, give_back, peek
from ratelimits.engine.policy.compiled import Check, CompiledPolicy
from ratelimits.engine.receipt import Receipt
from ratelimits.engine.table.current import PolicyTable, aget_table, get_table

__all__ = [
    "Check",
    "CompiledPolicy",
    "Decision",
    "PolicyTable",
    "Receipt",
    "Verdict",
    "adecide",
    "aget_table",
    "decide",
    "get_table",
    "give_back",
    "peek",
]
