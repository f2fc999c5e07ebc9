"""The demo site as tests/security/test_forged_addresses.py serves it: one trusted proxy on
127.0.0.1 (the test sends as the proxy from 127.0.0.1, as an attacker from 127.0.0.2),
an exempt network, and ``NUM_PROXIES`` = 1 left over from before ``TRUSTED_PROXIES``
existed: the setting that believed every sender, which ``TRUSTED_PROXIES`` now governs."""

from tests.site_settings import *  # noqa: F403
from tests.site_settings import RATELIMITS

#: The proxy's address; every other sender is untrusted.
PROXY = "127.0.0.1"
#: A network no policy limits (an internal monitor's).
EXEMPT = "10.99.0.0/16"

RATELIMITS = {
    **RATELIMITS,
    "NUM_PROXIES": 1,
    "TRUSTED_PROXIES": [PROXY],
    "EXEMPT_NETWORKS": [EXEMPT],
}
