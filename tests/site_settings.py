"""The demo's settings for the servers the tests start (gunicorn, uvicorn): the same site,
with the limiter waiting up to 1 s for Redis instead of 100 ms.

Those tests count admissions exactly (16 clients against 2 workers and Redis, on a
2-core machine) and assert that no request was decided by a fail mode. A busy machine
can keep Redis from answering within 100 ms now and then, which would open the breaker
and turn a few decisions into fail-mode ones: a fact about the machine, not about
admission. What a timeout does is tested in process, against a paused or stopped Redis
(``tests/engine/store/drills/``, ``tests/faces/test_async_failures.py``).
"""

from project.settings import *  # noqa: F403
from project.settings import RATELIMITS

RATELIMITS = {**RATELIMITS, "SOCKET_TIMEOUT": 1.0}
