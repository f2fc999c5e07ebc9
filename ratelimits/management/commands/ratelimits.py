"""``manage.py ratelimits``: see and fix what the limiter does, keep policies in files.

Subcommands: ``policies``, ``keys``, ``inspect``, ``reset``, ``audit-cleanup``, ``export``,
``import``, ``check``, ``adopt``, ``simulate``, ``traffic``. Run
``manage.py ratelimits <subcommand> --help`` for each one's options.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli.adopt import run_adopt
from ratelimits.cli.audit import run_audit_cleanup
from ratelimits.cli.check import run_check
from ratelimits.cli.inspect import run_inspect
from ratelimits.cli.keys import run_keys
from ratelimits.cli.policies import run_export, run_import, run_policies
from ratelimits.cli.reset import run_reset
from ratelimits.cli.simulate import add_arguments as simulate_arguments
from ratelimits.cli.simulate import run_simulate
from ratelimits.cli.traffic import run_traffic
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.testing.embedded import start_embedded
from ratelimits.tools.identities import IDENTITY_FORMS
from ratelimits.tools.policy_files import FORMATS

SUBCOMMANDS = {
    "policies": run_policies,
    "keys": run_keys,
    "inspect": run_inspect,
    "reset": run_reset,
    "export": run_export,
    "import": run_import,
    "check": run_check,
    "adopt": run_adopt,
    "simulate": functools.partial(run_simulate, embedded=start_embedded),
    "traffic": run_traffic,
    "audit-cleanup": run_audit_cleanup,
}


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def _positive_or_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 (no limit) or more")
    return value


class Command(BaseCommand):
    help = (
        "Inspect rate-limit policies and their keys in Redis; reset, export and import; "
        "adopt DRF's throttles."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

        listing = sub.add_parser("policies", help="List every policy.")
        self._json(listing)

        found = sub.add_parser("keys", help="List live keys (SCAN) with their counts.")
        found.add_argument("--policy", metavar="NAME", help="Only this policy's keys.")
        found.add_argument(
            "--identity", metavar="VALUE", help=f"Only this client: {IDENTITY_FORMS}."
        )
        found.add_argument(
            "--match",
            metavar="GLOB",
            help="Only identities matching this Redis glob, e.g. 'ip:203.0.113.*'.",
        )
        found.add_argument(
            "--limit",
            type=_positive_or_zero,
            default=1000,
            metavar="N",
            help="Stop after N keys without scanning the rest (default 1000; 0 for all).",
        )
        self._json(found)

        look = sub.add_parser("inspect", help="Show one key's full state without consuming.")
        look.add_argument("key", nargs="?", metavar="KEY", help="The key, as `keys` lists it.")
        look.add_argument("--policy", metavar="NAME", help="The policy (with --identity).")
        look.add_argument("--identity", metavar="VALUE", help=f"The client: {IDENTITY_FORMS}.")
        self._json(look)

        reset = sub.add_parser(
            "reset",
            help="Delete a policy's keys (all, or one client's), or one client's keys in "
            "every policy, lifting its lockouts.",
        )
        reset.add_argument(
            "--policy",
            metavar="NAME",
            help="The policy. Without it, --identity's keys in every policy that counts it "
            "(alone or in a pair such as username+ip).",
        )
        reset.add_argument(
            "--identity", metavar="VALUE", help=f"Only this client: {IDENTITY_FORMS}."
        )
        reset.add_argument("--dry-run", action="store_true", help="List the keys; delete nothing.")
        reset.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")
        self._json(reset)

        cleanup = sub.add_parser(
            "audit-cleanup",
            help="Delete the sign-in records older than SIGN_IN_AUDIT_RETENTION days.",
        )
        cleanup.add_argument(
            "--dry-run", action="store_true", help="Count the old records; delete nothing."
        )
        self._json(cleanup)

        export = sub.add_parser("export", help="Write every policy to a JSON or YAML file.")
        export.add_argument(
            "file", nargs="?", metavar="FILE", help="Where to write (default stdout)."
        )
        self._format(export)

        load = sub.add_parser("import", help="Create or update policies from a JSON or YAML file.")
        load.add_argument("file", metavar="FILE", help="The file to read ('-' for stdin).")
        self._format(load)
        load.add_argument("--dry-run", action="store_true", help="Show the changes; make none.")
        load.add_argument(
            "--prune", action="store_true", help="Also delete policies missing from the file."
        )
        load.add_argument("--yes", action="store_true", help="Do not ask before pruning.")
        self._json(load)

        check = sub.add_parser(
            "check", help="Which policies a request would meet, and this client's state in each."
        )
        check.add_argument("--path", required=True, help="The request path, e.g. /api/login/.")
        check.add_argument("--method", default="GET", help="The HTTP method (default GET).")
        check.add_argument("--user", metavar="USERNAME", help="As this logged-in user.")
        check.add_argument("--ip", metavar="ADDR", help="From this client address.")
        check.add_argument(
            "--header", metavar="NAME=VALUE", help="With this header, for header:<Name> policies."
        )
        self._json(check)

        adopt = sub.add_parser(
            "adopt", help="Write policies doing what the site's DRF throttles do now."
        )
        adopt.add_argument(
            "--mode",
            choices=("shadow", "enforce"),
            default=None,
            help="shadow: the policies count and log, and let requests pass; enforce: they "
            "deny. Also sets the mode of the policies an earlier run adopted. Without it, "
            "a stored policy keeps its mode and a new one is in shadow.",
        )
        adopt.add_argument(
            "--dry-run",
            action="store_true",
            help="Print the plan and the same plan as a policy file; write no policy.",
        )
        adopt.add_argument(
            "--output",
            metavar="FILE",
            help="Also write the plan as a policy file that `import` accepts ('-' for stdout).",
        )
        adopt.add_argument(
            "-v",
            "--verbosity",
            dest="adopt_verbosity",
            type=int,
            choices=(0, 1, 2, 3),
            default=None,
            help="1 (default): one line per policy; 2: each route it replaces too.",
        )
        self._format(adopt)

        simulate = sub.add_parser(
            "simulate",
            help="Replay access logs through the real scripts at the logs' clock: what each "
            "policy, limit or algorithm would have denied.",
        )
        simulate_arguments(simulate)

        traffic = sub.add_parser(
            "traffic",
            help="How far a policy's clients went per window, what another limit would have "
            "denied, and a suggested limit (from its traffic record).",
        )
        traffic.add_argument("policy", metavar="POLICY", help="The policy's name.")
        traffic.add_argument(
            "--since",
            default="24h",
            metavar="SPAN",
            help="The span read: 1h, 24h (default) or 7d, or any number of hours or days up to 7d.",
        )
        traffic.add_argument(
            "--what-if",
            dest="what_if",
            type=_positive,
            metavar="N",
            help="What a limit of N would have denied (default: the suggested limit).",
        )
        self._json(traffic)

    def handle(self, *args: Any, **options: Any) -> None:
        run = SUBCOMMANDS[options["subcommand"]]
        try:
            run(self, options)
        except connection.REDIS_ERRORS as e:
            where = _redis_location()
            raise CommandError(f"Redis at {where} {errors.what_went_wrong(e)}: {e}") from None
        except ConfigurationError as e:
            raise CommandError(str(e)) from None

    @staticmethod
    def _json(parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    @staticmethod
    def _format(parser: CommandParser) -> None:
        parser.add_argument(
            "--format",
            choices=FORMATS,
            help="json or yaml (default: from the file's extension; json for stdout).",
        )


def _redis_location() -> str:
    try:
        return connection.where()
    except ConfigurationError:
        return "(not configured)"
