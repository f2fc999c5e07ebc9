"""``manage.py ratelimits``: see and fix what the limiter does, keep policies in files.

Subcommands: ``policies``, ``keys``, ``inspect``, ``reset``, ``audit-cleanup``, ``export``,
``import``, ``check``, ``adopt``, ``simulate``, ``traffic``. Each is declared in its own
module of :mod:`ratelimits.cli` (``SUBCOMMAND``: its help, its arguments beside its body);
run ``manage.py ratelimits <subcommand> --help`` for each one's options.
"""

from __future__ import annotations

import functools
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ratelimits.cli import adopt, audit, check, inspect, keys, policies, reset, simulate, traffic
from ratelimits.cli.subcommand import Subcommand
from ratelimits.engine.store import connection, errors
from ratelimits.exceptions import ConfigurationError
from ratelimits.testing.embedded import start_embedded

#: Every subcommand, in the order ``--help`` lists them.
SUBCOMMANDS: tuple[Subcommand, ...] = (
    policies.POLICIES,
    keys.SUBCOMMAND,
    inspect.SUBCOMMAND,
    reset.SUBCOMMAND,
    audit.SUBCOMMAND,
    policies.EXPORT,
    policies.IMPORT,
    check.SUBCOMMAND,
    adopt.SUBCOMMAND,
    simulate.SUBCOMMAND,
    traffic.SUBCOMMAND,
)
#: What runs each one; ``simulate`` is given the embedded server (``ratelimits.testing``
#: sits above the subcommands' layer).
RUNS = {
    **{subcommand.name: subcommand.run for subcommand in SUBCOMMANDS},
    "simulate": functools.partial(simulate.run_simulate, embedded=start_embedded),
}


class Command(BaseCommand):
    help = (
        "Inspect rate-limit policies and their keys in Redis; reset, export and import; "
        "adopt DRF's throttles; replay access logs; read a policy's traffic."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        for subcommand in SUBCOMMANDS:
            subcommand.add_arguments(sub.add_parser(subcommand.name, help=subcommand.help))

    def handle(self, *args: Any, **options: Any) -> None:
        run = RUNS[options["subcommand"]]
        try:
            run(self, options)
        except connection.REDIS_ERRORS as e:
            where = _redis_location()
            raise CommandError(f"Redis at {where} {errors.what_went_wrong(e)}: {e}") from None
        except ConfigurationError as e:
            raise CommandError(str(e)) from None


def _redis_location() -> str:
    try:
        return connection.where()
    except ConfigurationError:
        return "(not configured)"
