"""``simulate``: replay an access log through the real decide code, and say what each policy
(or each limit and algorithm of a sweep) would have admitted and denied."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol, TextIO

import redis
from django.core.management.base import BaseCommand, CommandError

from ratelimits.cli import output
from ratelimits.cli.subcommand import Subcommand
from ratelimits.engine.policy.compiled import CompiledPolicy
from ratelimits.tools import policy_files
from ratelimits.tools.simulate import LiveServer, Request, proposals, refuse_live, simulate
from ratelimits.tools.simulate.formats import DEFAULT_FIELDS, FORMATS
from ratelimits.tools.simulate.ordering import DEFAULT_TOLERANCE

#: The exit status of a report that is printed but incomplete (lines or files skipped).
INCOMPLETE = 3
#: The proposed policy's fields, as options.
PROPOSAL_OPTIONS = ("endpoint", "algorithm", "limit", "window", "key", "methods", "counts", "cost")


class Server(Protocol):
    """A started throw-away server (:func:`ratelimits.testing.embedded.start_embedded`)."""

    url: str

    def stop(self) -> None: ...


def add_arguments(parser: Any) -> None:
    """``simulate``'s options."""
    parser.add_argument(
        "logs", nargs="+", metavar="LOG", help="Access logs (.gz read directly; '-' for stdin)."
    )
    parser.add_argument(
        "--format", dest="log_format", choices=FORMATS, help="The logs' format (default: detected)."
    )
    parser.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="PART=NAME",
        help="JSON/CSV logs: the field holding a part of the request, e.g. time=ts "
        f"(parts: {', '.join(DEFAULT_FIELDS)}).",
    )
    parser.add_argument(
        "--reorder",
        type=_seconds,
        default=DEFAULT_TOLERANCE,
        metavar="SECONDS",
        help=f"Lines out of time order by up to this much are put back in order "
        f"(default {DEFAULT_TOLERANCE:g}); older ones are skipped.",
    )
    chosen = parser.add_argument_group("policies (default: every enabled saved policy)")
    chosen.add_argument(
        "--policy", action="append", default=[], metavar="NAME", help="Only this saved policy."
    )
    chosen.add_argument(
        "--policies", metavar="FILE", help="The policies of a file that `import` accepts."
    )
    chosen.add_argument("--endpoint", help="A proposed policy's endpoint (not saved).")
    chosen.add_argument("--algorithm", default=None, help="Its algorithm (default sliding_log).")
    chosen.add_argument("--limit", type=_whole, help="Its limit.")
    chosen.add_argument("--window", type=_whole, help="Its window, in seconds.")
    chosen.add_argument("--key", default=None, help="Who it counts (default user_or_ip).")
    chosen.add_argument("--methods", default=None, help="Its HTTP methods (default all).")
    chosen.add_argument(
        "--counts", default=None, help="all (default), failures or successes (by status)."
    )
    chosen.add_argument(
        "--cost",
        default=None,
        metavar="N|FIELD",
        help="Units a request spends: a number, or the JSON/CSV field that holds each one's.",
    )
    sweep = parser.add_argument_group("sweeps")
    sweep.add_argument(
        "--limits", type=_limits, default=(), metavar="N,N,...", help="Replay each limit."
    )
    sweep.add_argument(
        "--algorithms",
        type=lambda text: [a.strip() for a in text.split(",") if a.strip()],
        default=[],
        metavar="all|A,B",
        help="Replay each algorithm, compared with the exact sliding_log.",
    )
    shown = parser.add_argument_group("report")
    shown.add_argument(
        "--top",
        type=_top,
        default=10,
        metavar="N|all",
        help="Clients listed per policy, most denied first (default 10).",
    )
    shown.add_argument("--json", action="store_true", help="Print JSON instead of tables.")
    server = parser.add_argument_group("server")
    server.add_argument(
        "--redis", metavar="URL", help="A throw-away server to replay on (default: embedded)."
    )
    server.add_argument(
        "--scratch",
        action="store_true",
        help="The --redis server holds rate limit keys but is scratch: replay anyway.",
    )


def run_simulate(
    command: BaseCommand, options: dict[str, Any], *, embedded: Callable[[], Server]
) -> None:
    policies = _policies(options)
    cost_field = _cost_field(options)
    request = Request(
        paths=options["logs"],
        policies=policies,
        fmt=options["log_format"],
        fields=_fields(options["field"]),
        tolerance=options["reorder"],
        limits=options["limits"],
        algorithms=options["algorithms"],
        cost_field=cost_field,
        top=options["top"],
    )
    if options["logs"].count("-") > 1:
        raise CommandError("'-' (standard input) can be given once.")
    for path in options["logs"]:
        if path != "-" and not Path(path).is_file():
            raise CommandError(f"{path}: no such file.")
    progress = Progress(command.stderr, _total_bytes(options["logs"]))
    with ExitStack() as stack:
        client = _server(options, embedded, stack)
        try:
            record = simulate(request, client, progress=progress)
        except ValueError as e:
            raise CommandError(str(e)) from None
        finally:
            progress.done()
    if options["json"]:
        command.stdout.write(output.as_json(record))
    else:
        command.stdout.write(text_report(record))
    if not record["complete"]:
        raise CommandError(_incomplete(record), returncode=INCOMPLETE)


def _server(options: dict[str, Any], embedded: Callable[[], Server], stack: ExitStack) -> Any:
    url = options["redis"]
    if url is None:
        if options["scratch"]:
            raise CommandError("--scratch is about a --redis server; give --redis URL.")
        server = embedded()
        stack.callback(server.stop)
        url = server.url
    try:
        client = redis.Redis.from_url(url, socket_timeout=30)
        client.ping()
    except ValueError as e:
        raise CommandError(f"--redis {url!r}: {e}") from None
    stack.callback(client.close)
    if options["redis"] is not None and not options["scratch"]:
        try:
            refuse_live(client)
        except LiveServer as e:
            raise CommandError(f"Nothing replayed: {e}") from None
    return client


def _policies(options: dict[str, Any]) -> list[CompiledPolicy]:
    proposing = [name for name in PROPOSAL_OPTIONS if options.get(name) is not None]
    proposing = [name for name in proposing if name != "cost" or options["endpoint"]]
    sources = bool(proposing) + bool(options["policies"]) + bool(options["policy"])
    if sources > 1:
        raise CommandError(
            "Choose the policies one way: --policy NAME (saved), --policies FILE, or a "
            "proposed policy (--endpoint, --limit, --window...)."
        )
    try:
        if proposing:
            return [_proposed(options)]
        if options["policies"]:
            return _from_file(options["policies"])
        found = proposals.saved(options["policy"])
    except ValueError as e:
        raise CommandError(str(e)) from None
    if not found:
        raise CommandError(
            "No enabled saved policy to replay: save one, or propose one with --endpoint, "
            "--limit and --window."
        )
    return found


def _proposed(options: dict[str, Any]) -> CompiledPolicy:
    if options["limit"] is None and options["limits"]:  # the sweep gives the limits
        options = {**options, "limit": options["limits"][0]}
    missing = [f"--{name}" for name in ("endpoint", "limit", "window") if options[name] is None]
    if missing:
        raise CommandError(f"A proposed policy needs {', '.join(missing)} (or --limits).")
    cost = options["cost"]
    return proposals.proposed(
        endpoint=options["endpoint"],
        algorithm=options["algorithm"] or "sliding_log",
        limit=options["limit"],
        window=options["window"],
        key=options["key"] or "user_or_ip",
        methods=options["methods"] or "",
        counts=options["counts"] or "all",
        cost=int(cost) if cost is not None and cost.isdigit() else 1,
    )


def _from_file(path: str) -> list[CompiledPolicy]:
    fmt = policy_files.detect_format(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CommandError(f"Cannot read {path}: {getattr(e, 'strerror', None) or e}.") from None
    try:
        return proposals.from_file(text, fmt, path)
    except policy_files.PolicyFileError as e:
        raise CommandError(f"{path} is not a policy file `import` accepts:\n{e}") from None


def _cost_field(options: dict[str, Any]) -> str | None:
    cost = options["cost"]
    if cost is None or cost.isdigit():
        if cost is not None and int(cost) < 1:
            raise CommandError("--cost must be at least 1.")
        return None
    return cost


def _fields(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        part, sep, name = pair.partition("=")
        if not sep or not part.strip() or not name.strip():
            raise CommandError(f"--field {pair!r} must be PART=NAME, e.g. time=ts.")
        if part.strip() not in DEFAULT_FIELDS:
            parts = ", ".join(DEFAULT_FIELDS)
            raise CommandError(f"--field {pair!r}: {part!r} is not one of {parts}.")
        found[part.strip()] = name.strip()
    return found


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{value:g} must be from 0 to 3600 seconds")
    return value


def _limits(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(_whole(part.strip()) for part in text.split(",") if part.strip()))


def _top(text: str) -> int | None:
    return None if text == "all" else _whole(text)


def _total_bytes(paths: list[str]) -> int | None:
    """The logs' size, when every one is a plain file (a bar needs it)."""
    total = 0
    for path in paths:
        if path == "-" or path.endswith(".gz") or not os.path.isfile(path):
            return None
        total += os.path.getsize(path)
    return total


class Progress:
    """A progress bar with lines per second, on ``stream`` when it is a terminal."""

    def __init__(self, stream: Any, total: int | None) -> None:
        self.stream: TextIO = getattr(stream, "_out", stream)
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.shown = False
        self.next_at = time.monotonic() + 0.5

    def __call__(self, lines: int, spent: float, done: int) -> None:
        if not self.enabled or time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + 0.5
        rate = f"{lines / spent:,.0f} lines/s" if spent > 0 else ""
        bar = ""
        if self.total:
            share = min(1.0, done / self.total)
            filled = round(share * 30)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {share:4.0%} "
        self.stream.write(f"\r{bar}{lines:,} lines, {rate} ")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _incomplete(record: dict[str, Any]) -> str:
    parts = []
    if record["skipped"]:
        parts.append(output.count(record["skipped"], "line") + " skipped")
    bad = [f for f in record["files"] if "problem" in f]
    if bad:
        parts.append(output.count(len(bad), "file") + " not read")
    return "The report is incomplete: " + ", ".join(parts) + "."


POLICY_COLUMNS = (
    "policy",
    "algorithm",
    "limit",
    "window",
    "key",
    "requests",
    "admitted",
    "denied",
    "denied %",
    "clients",
    "denied clients",
    "peak p50/p90/p99/max",
    "first denial",
)
NUMERIC = ("limit", "window", "requests", "admitted", "denied", "denied %", "clients")
TOP_COLUMNS = ("client", "requests", "admitted", "denied", "peak")


def text_report(record: dict[str, Any]) -> str:
    """The report as people read it."""
    lines = []
    spent = record["seconds"]
    speed = f", {record['lines_per_second']:,} lines/s" if record["lines_per_second"] else ""
    lines.append(
        f"Replayed {record['replayed']:,} of {record['lines']:,} lines "
        f"({record['start'] or '-'} to {record['end'] or '-'}) in {spent:.1f} s{speed}; "
        f"{record['skipped']:,} skipped, {record['unmatched']:,} met no policy, "
        f"{record['exempt']:,} exempt."
    )
    policies = record["policies"]
    compared = any("differs_from_sliding_log" in p for p in policies)
    columns = POLICY_COLUMNS
    if compared:
        columns += ("≠ sliding_log", "bytes/client")
    rows = []
    for p in policies:
        peaks = p["peak_per_window"]
        row = [
            p["name"],
            p["algorithm"],
            p["limit"],
            p["window"],
            p["key"],
            p["requests"],
            p["admitted"],
            p["denied"],
            f"{p['denied_share'] * 100:.1f}",
            p["clients"],
            p["clients_denied"],
            f"{peaks['p50']}/{peaks['p90']}/{peaks['p99']}/{peaks['max']}",
            p["first_denial"],
        ]
        if compared:
            differs = p.get("differs_from_sliding_log")
            row.append(
                "-"
                if differs is None
                else f"+{differs['admitted_where_exact_denied']}"
                f"/-{differs['denied_where_exact_admitted']}"
            )
            row.append(p.get("memory_per_client"))
        rows.append(row)
    if rows:
        lines += ["", output.table(columns, rows, numeric=NUMERIC)]
    for p in policies:
        if not p["top"]:
            continue
        title = f"{p['name']} ({p['algorithm']}, {p['limit']} per {p['window']} s)"
        lines += ["", f"Top clients of {title}:"]
        top_rows = [
            [c["client"], c["requests"], c["admitted"], c["denied"], c["peak_per_window"]]
            for c in p["top"]
        ]
        lines.append(output.table(TOP_COLUMNS, top_rows, numeric=TOP_COLUMNS[1:]))
    if compared:
        lines += [
            "",
            "≠ sliding_log: +admitted where the exact sliding_log denied / -denied where it "
            "admitted.",
        ]
    for left in record["left_out"]:
        lines.append(f"Not replayed: {left['policy']}: {left['reason']}.")
    for note in record["notes"]:
        lines.append(f"Note: {note}.")
    for bad in record["files"]:
        if "problem" in bad:
            lines.append(f"File {bad['file']} {bad['problem']}.")
    if record["skipped_examples"]:
        lines += ["", "Skipped lines (the first few):"]
        for example in record["skipped_examples"]:
            lines.append(f"  {example['file']}:{example['line']}: {example['reason']}")
    return "\n".join(lines)


SUBCOMMAND = Subcommand(
    "simulate",
    "Replay access logs through the real scripts at the logs' clock: what each policy, "
    "limit or algorithm would have denied.",
    add_arguments,
    run_simulate,  # type: ignore[arg-type]  # the command passes the embedded server
)
