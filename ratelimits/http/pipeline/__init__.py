"""The one pipeline every face runs a request through: prepare (the request's facts,
the policies it falls under, identities, costs), decide (one call), settle (the
decisions kept for the headers, what is given back after the response, the signals,
the 429).

:func:`~.core.plan` is the pipeline without I/O; :func:`run` drives it from sync code
and :func:`arun` from a coroutine. A face says what it asks with an :class:`Ask` and
gets a :class:`Passage`.
"""

from ratelimits.http.pipeline.core import Ask, Passage, undecided
from ratelimits.http.pipeline.drivers import arun, run

__all__ = ["Ask", "Passage", "arun", "run", "undecided"]
