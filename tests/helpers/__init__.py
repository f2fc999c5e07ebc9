"""Small helpers shared by the tests, one module a subject; import them from here."""

from __future__ import annotations

from tests.helpers.admin import (
    history,
    logged_in,
    signal_senders,
    staff_client,
)
from tests.helpers.command import (
    Terminal,
    cells,
    problems_of,
    run,
    run_json,
)
from tests.helpers.counting import count_verdict
from tests.helpers.deciding import (
    DECIDE_COMMANDS,
    IDENTITY,
    commands_sent,
    decide_calls,
    decide_command,
    hit,
    hit_all,
    libraries,
    lock_out,
    redis_now_us,
    require_functions,
    server_major,
    use,
)
from tests.helpers.identities import (
    HASHED_HEADER,
    HASHED_USER,
    LONGEST_NAME,
    LONGEST_PREFIX,
    NASTY_HEADER_VALUES,
    assert_bounded,
    hashed,
    header_policy,
    search_policy,
    user_policy,
)
from tests.helpers.policies import (
    OverrideSite,
    create_policy,
    fail_mode_policies,
    make_policy,
    override_site,
    policy,
)
from tests.helpers.processes import (
    ROOT,
    item_statuses,
    start_worker,
    statuses,
    worker_line,
)
from tests.helpers.redis_setup import (
    caches_at,
    ratelimits_settings,
    sentinel_failover,
    sentinel_servers,
    sentinel_switch,
)
from tests.helpers.reminders import (
    ManualClock,
    remind_on,
)
from tests.helpers.waiting import wait_clear_of_window_boundary, wait_until

__all__ = [
    "DECIDE_COMMANDS",
    "HASHED_HEADER",
    "HASHED_USER",
    "IDENTITY",
    "LONGEST_NAME",
    "LONGEST_PREFIX",
    "NASTY_HEADER_VALUES",
    "ROOT",
    "ManualClock",
    "OverrideSite",
    "Terminal",
    "assert_bounded",
    "caches_at",
    "cells",
    "commands_sent",
    "count_verdict",
    "create_policy",
    "decide_calls",
    "decide_command",
    "fail_mode_policies",
    "hashed",
    "header_policy",
    "history",
    "hit",
    "hit_all",
    "item_statuses",
    "libraries",
    "lock_out",
    "logged_in",
    "make_policy",
    "override_site",
    "policy",
    "problems_of",
    "ratelimits_settings",
    "redis_now_us",
    "remind_on",
    "require_functions",
    "run",
    "run_json",
    "search_policy",
    "sentinel_failover",
    "sentinel_servers",
    "sentinel_switch",
    "server_major",
    "signal_senders",
    "staff_client",
    "start_worker",
    "statuses",
    "use",
    "user_policy",
    "wait_clear_of_window_boundary",
    "wait_until",
    "worker_line",
]
