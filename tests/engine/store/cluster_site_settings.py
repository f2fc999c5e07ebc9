"""The demo as the tests serve it (:mod:`tests.faces.served_settings`: the limiter waits up
to 1 s for Redis, and each response names the worker that answered it in
``X-Served-By``), limiting on a Redis Cluster: ``RATELIMITS_CLUSTER_NODES`` names its
startup nodes, separated by commas. For ``tests/engine/store/test_cluster_growth.py``."""

import os

from tests.faces.served_settings import *  # noqa: F403
from tests.site_settings import RATELIMITS

RATELIMITS = {**RATELIMITS, "CLUSTER_NODES": os.environ["RATELIMITS_CLUSTER_NODES"].split(",")}
