"""The demo policies, one per algorithm and per way of matching."""

DEMO_POLICIES = [
    {
        "name": "search",
        "endpoint": "search",
        "algorithm": "sliding_counter",
        "limit": 20,
        "window": 60,
        "key": "user_or_ip",
    },
    {
        "name": "search-quota",
        "endpoint": "search",
        "algorithm": "fixed_window",
        "calendar": "month",  # resets on the 1st, midnight, in TIME_ZONE
        "limit": 1000,
        "window": 30 * 24 * 3600,  # a calendar period's nominal length (set for you)
        "key": "user_or_ip",
    },
    {
        "name": "login",
        "endpoint": "api:login",
        "methods": "POST",
        "algorithm": "sliding_log",
        "limit": 5,
        "window": 60,
        "key": "ip",
        "counts": "failures",
        "fail_open": False,
    },
    {
        "name": "payment",
        "endpoint": "/api/payment/*",
        "methods": "POST",
        "algorithm": "sliding_log",
        "limit": 3,
        "window": 60,
        "key": "user",
        "fail_open": False,
    },
    {
        "name": "items",
        "endpoint": "api:items",
        "algorithm": "fixed_window",
        "limit": 10,
        "window": 10,
        "key": "user_or_ip",
    },
    {
        "name": "signin",
        "endpoint": "login",
        "methods": "POST",
        "algorithm": "sliding_log",
        "limit": 5,
        "window": 60,
        "key": "ip",
        "counts": "failures",  # a failed sign-in answers 400; a correct one does not count
        "lockout": 15 * 60,  # then the next attempt is denied and locks the address out
        "fail_open": False,
    },
    {
        # Every sign-in anywhere (the admin, /accounts/login/, /api/login/, DRF's Basic
        # authentication), decided by ratelimits.backends.RateLimitBackend, as
        # docs/sign-in.md recommends: 5 failed sign-ins per username and address in 15
        # minutes, then that pair is locked out for 15 minutes (the right password too,
        # from that address; the owner still signs in from elsewhere)...
        "name": "signin-pair",
        "endpoint": "*",
        "algorithm": "sliding_log",
        "limit": 5,
        "window": 15 * 60,
        "key": "username+ip",
        "counts": "sign_in_failures",
        "lockout": 15 * 60,
        "fail_open": False,
    },
    {
        # ... 30 failed sign-ins per address in 15 minutes, whatever the usernames...
        "name": "signin-address",
        "endpoint": "*",
        "algorithm": "sliding_log",
        "limit": 30,
        "window": 15 * 60,
        "key": "ip",
        "counts": "sign_in_failures",
        "fail_open": False,
    },
    {
        # ... and 50 per username in an hour from any addresses (a botnet guessing one
        # account), then that username is locked out for 5 minutes.
        "name": "signin-username",
        "endpoint": "*",
        "algorithm": "sliding_log",
        "limit": 50,
        "window": 60 * 60,
        "key": "username",
        "counts": "sign_in_failures",
        "lockout": 5 * 60,
        "fail_open": False,
    },
    {
        "name": "hello",
        "endpoint": "hello",
        "algorithm": "compact_log",
        "limit": 10,
        "window": 60,
        "key": "user_or_ip",
    },
    {
        "name": "report",
        "endpoint": "api:report",
        "algorithm": "concurrency",
        "limit": 2,
        "window": 60,
        "key": "user_or_ip",
    },
    {
        "name": "ninja-items",
        "endpoint": "ninja:items",
        "algorithm": "fixed_window",
        "limit": 10,
        "window": 10,
        "key": "user_or_ip",
    },
]

#: Demo overrides: (policy name, group name, fields). The group is created if missing.
DEMO_GROUP_OVERRIDES = [
    ("search", "partners", {"limit": 200, "comment": "Partner plan: 10x the search limit."}),
]
