"""``ratelimits simulate``: an access log replayed through the real decide code at the log's
own clock, on a scratch server; what each policy (or each limit and algorithm of a sweep)
would have admitted and denied, per client.

The modules, in the order a line meets them: :mod:`~.sources` reads files (``.gz``,
``-``) in a format of :mod:`~.formats`; :mod:`~.ordering` merges them in time order;
:mod:`~.routing` finds the policies a line meets, of those :mod:`~.proposals` and
:mod:`~.selection` chose; :mod:`~.identities` says who it counts as; :mod:`~.replay`
decides it on a server :mod:`~.scratch` vouched for; :mod:`~.tally` counts and
:mod:`~.report` writes the record (lines left out: :mod:`~.problems`). :mod:`~.run` ties
them together.
"""

from ratelimits.tools.simulate.run import Request, simulate
from ratelimits.tools.simulate.scratch import LiveServer, refuse_live

__all__ = ["LiveServer", "Request", "refuse_live", "simulate"]
