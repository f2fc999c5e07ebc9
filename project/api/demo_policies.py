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
