"""A replay's report as a record: what ``simulate --json`` prints, and what its table shows.

The schema is documented in ``docs/tuning.md``; fields are only added, never renamed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ratelimits.tools.simulate.identities import header_field
from ratelimits.tools.simulate.problems import Problems
from ratelimits.tools.simulate.replay import Outcome
from ratelimits.tools.simulate.selection import Selection, Variant
from ratelimits.tools.simulate.sources import LogFile
from ratelimits.tools.simulate.tally import PolicyTally


def iso(time_us: int | None) -> str | None:
    """``2026-11-30T10:00:00.250000+00:00`` (no fraction when whole) for a time in µs."""
    if time_us is None:
        return None
    seconds, micros = divmod(time_us, 1_000_000)
    when = datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=micros)
    return when.isoformat()


def unshown_reason(variant: Variant) -> str:
    """Why the log cannot show who ``variant``'s policy counts."""
    policy = variant.shown
    field = header_field(policy)
    if policy.kind.name == "header" and field is not None:
        return (
            f"key {policy.key}: the log has no {field} field (log the header as JSON or CSV "
            "under that name)"
        )
    return f"key {policy.key}: the log does not show it"


def policy_record(variant: Variant, tally: PolicyTally, top: int | None) -> dict[str, Any]:
    """One variant's entry of ``policies``."""
    policy = variant.shown
    requests = tally.requests
    record: dict[str, Any] = {
        "name": policy.name,
        "endpoint": policy.endpoint,
        "methods": sorted(policy.methods),
        "algorithm": policy.algorithm,
        "limit": policy.limit,
        "window": policy.window,
        "key": policy.key,
        "rate": policy.rate_display,
        "requests": requests,
        "admitted": tally.admitted,
        "denied": tally.denied,
        "denied_share": round(tally.denied / requests, 6) if requests else 0.0,
        "denied_by_other_policies": tally.denied_by_others,
        "clients": len(tally.clients),
        "clients_denied": tally.clients_denied,
        "first_denial": iso(tally.first_denial_us),
        "peak_per_window": tally.peaks(),
        "top": [
            {
                "client": client,
                "requests": counts.requests,
                "admitted": counts.admitted,
                "denied": counts.denied,
                "peak_per_window": counts.peak,
            }
            for client, counts in tally.top(top)
        ],
        "not_counted": tally.uncounted,
        "not_shown": tally.unshown,
    }
    if variant.group >= 0 and tally.memory_per_client is not None:
        record["memory_per_client"] = round(tally.memory_per_client)
    return record


def build(
    outcome: Outcome,
    problems: Problems,
    selection: Selection,
    files: list[LogFile],
    *,
    top: int | None,
    compared: bool,
) -> dict[str, Any]:
    """The whole report. ``compared``: the variants were swept over algorithms, and each
    carries its differences from the exact one."""
    left_out = [{"policy": name, "reason": reason} for name, reason in selection.left_out]
    policies = []
    for variant in selection.variants:
        tally = outcome.tallies[variant.policy.name]
        if tally.unshown and not tally.requests:
            left_out.append({"policy": variant.shown.name, "reason": unshown_reason(variant)})
            continue
        record = policy_record(variant, tally, top)
        if compared and variant.group >= 0:
            record["differs_from_sliding_log"] = {
                "admitted_where_exact_denied": tally.admitted_not_exact,
                "denied_where_exact_admitted": tally.denied_not_exact,
            }
        policies.append(record)
    notes = list(outcome.notes)
    counted_by_user = [v.shown.name for v in selection.variants if v.shown.kind.needs_user]
    if counted_by_user and outcome.lines and not outcome.with_user:
        notes.append(
            "no line has a user: policies that count users ("
            + ", ".join(counted_by_user)
            + ") saw only anonymous requests; log the site's user name in the user field"
        )
    if outcome.bad_costs:
        notes.append(f"{outcome.bad_costs} lines had no whole cost of at least 1: cost 1 applied")
    read = sum(file.lines for file in files)
    elapsed = outcome.elapsed
    return {
        "complete": problems.complete,
        "lines": read,
        "replayed": outcome.lines,
        "skipped": problems.skipped,
        "skipped_examples": problems.examples,
        "skipped_by_reason": problems.by_kind,
        "files": [
            {"file": file.name, "lines": file.lines}
            | next(
                ({"problem": bad["reason"]} for bad in problems.files if bad["file"] == file.name),
                {},
            )
            for file in files
        ],
        "start": iso(outcome.start_us),
        "end": iso(outcome.end_us),
        "exempt": outcome.exempt,
        "unmatched": outcome.unmatched,
        "calls": outcome.calls,
        "seconds": round(elapsed, 3),
        "lines_per_second": round(outcome.lines / elapsed) if elapsed > 0 else None,
        "left_out": left_out,
        "notes": notes,
        "policies": policies,
    }
