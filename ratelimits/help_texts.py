"""Internal, not part of the public API (see docs/api.md).

The words the admin shows under each field of the policy models."""

from __future__ import annotations

#: ``Policy``'s fields.
POLICY_HELP: dict[str, str] = {
    "name": "Unique short name; it appears in Redis keys and response headers.",
    "endpoint": (
        "What the policy matches: a DRF throttle_scope (search), a URL name "
        "(api:search), several of them comma-separated (api:accounts,api:payments: one "
        "counter for all) or a path glob starting with / or * (/api/search/*)."
    ),
    "methods": "Comma-separated HTTP methods (GET,POST). Blank matches every method.",
    "limit": (
        "Requests allowed per window (1 to 2147483647); for concurrency, requests in "
        "progress at once."
    ),
    "window": (
        "Window length in seconds (1 s to 30 days); for concurrency, the lease: a "
        "request's slot frees itself after it even if its response never ends. With a "
        "calendar period it is set for you (the period's nominal length)."
    ),
    "calendar": (
        "fixed_window only: count per calendar day, week or month of the time zone, "
        "resetting at its local midnight (a quota: 10,000 per calendar month). Blank: "
        "the rolling window."
    ),
    "time_zone": (
        "The calendar period's IANA time zone (Europe/Berlin). Blank: the site's "
        "TIME_ZONE. Only for a calendar period."
    ),
    "lockout": (
        "Seconds a client is locked out after its first denied request: every request "
        "is denied until then, whatever the window allows (a sign-in form: 900). 0: "
        "no lockout. Not for concurrency or a sharded policy."
    ),
    "lockout_until_lifted": (
        "Lock a client out until an operator lifts it (the admin's reset, ratelimits reset, "
        "or for a username a new password), instead of for the lockout's seconds: leave the "
        "lockout at 0. The lock's key still expires, after ten years."
    ),
    "extend_lockout": (
        "Every attempt during a lockout starts it again, so a client that keeps trying "
        "stays locked out (django-axes' AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT)."
    ),
    "reset_on_success": (
        "A successful sign-in clears the account's failures (its counter in this policy), "
        "as django-axes' AXES_RESET_ON_SUCCESS. Only for a sign-in policy counting by "
        "username or username+ip."
    ),
    "key": (
        "Who is counted: user, ip, user_or_ip, anon (requests without a user, by address; "
        "signed-in users are not counted), global, header:NAME (header:X-Api-Key), "
        "session (the browser session, by address without one), or username (the "
        "username a sign-in attempts; failed sign-ins only); or two of them joined by + "
        "for one counter per pair (username+ip). A client can send any header value it "
        "likes: a header key counts per value only behind a gateway that sets the header "
        "itself."
    ),
    "ipv6_prefix": (
        "IPv6 clients are counted per network of this prefix length (48: one counter "
        "per /48, which one customer of a hosting provider often holds; 128: per "
        "address). Blank: the IPV6_PREFIX setting (64)."
    ),
    "shards": (
        "Split the limit over this many Redis keys (1 to 64, at most the limit), for a "
        "hot key such as a global policy on a busy endpoint: each request counts in one "
        "shard chosen at random, each shard admits its share of the limit. Never admits "
        "more than the limit; can deny while another shard still has room."
    ),
    "burst": (
        "token_bucket only: how many requests may come at once (1 to 2147483647); "
        "the limit per window is the steady rate after them. Blank: the limit."
    ),
    "cost": (
        "Units one request spends (1 to 2147483647; a view's ratelimit_cost replaces "
        "it). A request costing more than the policy can ever grant is always denied."
    ),
    "counts": (
        "Which responses spend: a request spends when admitted and gets its units back "
        "after a response that does not count. Failures only suits an API's "
        "authentication; failed sign-ins counts each failed authenticate(), as "
        "RateLimitBackend sees it, whatever the response. A concurrency policy gives "
        "every slot back: all."
    ),
    "fail_open": "When Redis cannot answer: let requests through (checked) or deny them.",
    "traffic": "Keep this policy's traffic record (how far its clients go per window, for "
    "7 days: the Traffic panel below). Costs no Redis call per request.",
}

#: ``PolicyOverride``'s fields.
OVERRIDE_HELP: dict[str, str] = {
    "user": "This user, whatever the policy counts them by.",
    "group": "Every member of this group (a user in several gets the most generous).",
    "identity": (
        "An IP address or network (203.0.113.7, 10.0.0.0/8); for a policy keyed by "
        "header:NAME the header's value (an API key); for one keyed by user or "
        "user_or_ip, auth:<name> of an API client that is not a user; for a sign-in "
        "policy keyed by username, username:<name>. Keys and usernames are stored hashed, "
        "never shown again."
    ),
    "limit": (
        "Requests allowed per window for them (the policy's window); for a concurrency "
        "policy, their requests in progress at once. 0 blocks them: every request denied, "
        "without asking Redis (a block-list). Blank if exempt."
    ),
    "exempt": "Never limit them under this policy.",
    "comment": "Why (a plan, a ticket).",
}
