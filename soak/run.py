"""``python -m soak.run TOPOLOGY --seconds S --out DIR``: one topology's soak, in a
process of its own (Django's settings name the topology's servers).

It starts the topology's Redis servers, migrates a fresh SQLite database, imports
``policies.json`` with ``manage.py ratelimits import``, serves the site under gunicorn
and uvicorn until every endpoint is decided under its policy on both, runs the load a
few seconds (the code flushed halfway), stops the site, deletes every key and measures
Redis's memory at rest (:mod:`soak.probes`), then serves it again and runs the
load for ``S`` seconds with the fault schedule and the memory samples beside it. After
the load it watches the concurrency leases go, stops the site, measures the memory once
more, and writes the history into ``DIR`` (:mod:`soak.history`). The exit status is 0
when the run could be made, whatever it found: the checker judges.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from soak import faults, history, load, mix, probes
from soak.site import ROOT, Site, manage
from soak.topology import TOPOLOGIES, Topology

#: Seconds to wait for every endpoint to be decided under its policy after the start, and
#: seconds of load before the memory's baseline.
WARM_UP_TIMEOUT = 60.0
WARM_UP_SECONDS = 6.0
#: The concurrency policy's lease, and the slack to wait for its keys to go.
LEASE_SLACK = 5.0
#: Seconds to wait for a fault still running when the load stops.
FAULT_TIMEOUT = 120.0


def site_env(topology: Topology, directory: Path) -> dict[str, str]:
    """The environment of the site and of ``manage.py`` for this run."""
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="soak.settings",
        DEMO_DB=str(directory / "db.sqlite3"),
        DJANGO_DEBUG="0",
        RATELIMITS_NUM_PROXIES="0",
        PYTHONPATH=str(ROOT),
        **topology.env(),
    )
    return env


def prepare(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The database migrated and the policies imported; the policies' rows."""
    import django

    os.environ.update(env)
    django.setup()
    from django.core.management import call_command

    from project.api.views import ReportView

    call_command("migrate", verbosity=0)
    manage(env, "ratelimits", "import", str(mix.POLICY_FILE))
    rows = {row["name"]: row for row in mix.policy_rows()}
    rows[mix.REPORT]["hold"] = ReportView.BUILD_SECONDS
    return rows


def warm_up(site: Site) -> None:
    """Until each endpoint, on each server, answers under its policy."""
    deadline = time.monotonic() + WARM_UP_TIMEOUT
    for server, port in site.ports.items():
        sender = load.Sender(-1, {server: port})
        for endpoint in mix.ENDPOINTS:
            while sender.send(server, endpoint, "warm-up").decided != history.REDIS:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{endpoint.path} on {server} never saw its policy")
                time.sleep(0.2)
        sender.close()


def soak(topology: Topology, seconds: float, out: Path) -> history.Meta:
    env = site_env(topology, out)
    policies = prepare(env)
    fresh = probes.baselines(every_server(topology)).primary
    warm_up_load(topology, env, out)
    baseline = probes.baselines(every_server(topology))
    memory = probes.MemoryWatch(topology, baseline)
    version = str(probes.client(topology.primaries()[0]).info("server")["redis_version"])
    site = Site(env, out)
    site.start()
    try:
        warm_up(site)
        originals = {name: int(row["limit"]) for name, row in policies.items()}
        chaos = faults.Chaos(topology, site, env, out, originals)
        started = time.time()
        schedule = faults.Schedule(chaos, started, seconds)
        memory.start()
        schedule.start()
        records = load.run(site.ports, seconds)
        stopped = time.time()
        memory.stop()
        schedule.stop()
        schedule.join(timeout=FAULT_TIMEOUT)
        window = float(policies[mix.REPORT]["window"])
        looks = probes.watch_leases(topology, window + LEASE_SLACK)
    finally:
        site.stop()
    memory.samples.append(probes.final_sample(topology, baseline))
    history.write_lines(out / history.RECORDS, records)
    history.write_lines(out / history.FAULTS, schedule.faults)
    history.write_lines(out / history.MEMORY, memory.samples)
    history.write_lines(out / history.LEASES, looks)
    return history.Meta(
        topology=topology.name,
        started=started,
        stopped=stopped,
        seconds=seconds,
        threads=mix.THREADS,
        target_rate=mix.RATE,
        policies=policies,
        redis_version=version,
        servers={"redis": topology.describe()},
        memory={
            "fresh": fresh,
            "baseline": baseline.primary,
            "first_use": baseline.primary - fresh,
        },
    )


def warm_up_load(topology: Topology, env: dict[str, str], out: Path) -> None:
    """The site served under the load for :data:`WARM_UP_SECONDS`, the code flushed
    halfway, then stopped and every key deleted: a server keeps a few hundred KB more once
    its clients came and went and it loaded its code again, whatever comes after, which
    the memory's baseline must hold."""
    site = Site(env, out)
    site.start()
    try:
        warm_up(site)
        flusher = threading.Timer(WARM_UP_SECONDS / 2, flush_all_code, args=(topology,))
        flusher.start()
        load.run(site.ports, WARM_UP_SECONDS)
        flusher.join()
    finally:
        site.stop()
    for node in topology.primaries():
        probes.client(node).flushall(asynchronous=False)


def flush_all_code(topology: Topology) -> None:
    for node in topology.primaries():
        faults.flush_code(node)


def every_server(topology: Topology) -> list[Any]:
    servers = getattr(topology, "servers", None)
    return list(servers) if servers else topology.primaries()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak.run", description=__doc__.split("\n")[0])
    parser.add_argument("topology", choices=sorted(TOPOLOGIES))
    parser.add_argument("--seconds", type=float, required=True, help="seconds of load")
    parser.add_argument("--out", type=Path, required=True, help="the run's directory")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    topology = TOPOLOGIES[args.topology]()
    started = time.time()
    try:
        topology.start()
        meta = soak(topology, args.seconds, args.out)
    except Exception:
        error = traceback.format_exc()
        print(error, file=sys.stderr)
        meta = history.Meta(
            args.topology, started, time.time(), args.seconds, 0, 0.0, {}, "", error=error[-4000:]
        )
    finally:
        topology.stop()
    history.write_meta(args.out / history.META, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
