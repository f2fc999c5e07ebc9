"""A throw-away PostgreSQL server for the test run: ``initdb`` into a temporary folder,
then ``postgres`` on a free port of 127.0.0.1, trusting local connections.

``RATELIMITS_TEST_DATABASE=postgresql`` makes ``tests/conftest.py`` start one and run the
suite on it (``make test-postgres``). The binaries are ``$PG_BIN``'s, else the newest
Debian's ``/usr/lib/postgresql/*/bin``, else those on ``PATH``. PostgreSQL refuses to run as
root: as root, ``initdb`` and the server run as the ``postgres`` user (which Debian's package
creates).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ratelimits.testutils import free_port, stop_process

#: The role and database the tests connect as; the test database is ``test_ratelimits``.
USER = "ratelimits"
NAME = "ratelimits"


def find_bin_dir() -> Path:
    """The folder holding ``initdb`` and ``postgres``."""
    configured = os.environ.get("PG_BIN")
    if configured:
        return Path(configured)
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True
    )
    for folder in debian:
        if (folder / "initdb").is_file():
            return folder
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise FileNotFoundError(
        "No PostgreSQL server: install Debian's postgresql (apt-get install postgresql) "
        "or set PG_BIN to the folder holding initdb and postgres."
    )


def settings_entry(port: int) -> dict[str, str]:
    """Django's ``DATABASES`` entry for a server of this module on ``port``."""
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": NAME,
        "USER": USER,
        "PASSWORD": "",
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }


class PostgresServer:
    """One PostgreSQL server on 127.0.0.1, its data in a folder of its own, without fsync."""

    def __init__(self, port: int | None = None) -> None:
        self.bin = find_bin_dir()
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="ratelimits-postgres-"))
        self.process: subprocess.Popen[bytes] | None = None
        #: ``Popen`` arguments that run a server program as a user PostgreSQL accepts.
        self._as: dict[str, Any] = {"cwd": self.dir}
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self._as.update(user=owner.pw_uid, group=owner.pw_gid, extra_groups=[])

    @property
    def settings(self) -> dict[str, str]:
        """Django's ``DATABASES`` entry for the server."""
        return settings_entry(self.port)

    def start(self, timeout: float = 60.0) -> PostgresServer:
        data = self.dir / "data"
        subprocess.run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            ],
            check=True,
            capture_output=True,
            timeout=timeout,
            **self._as,
        )
        log = open(self.dir / "postgres.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={self.dir}",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            **self._as,
        )
        self._wait_ready(timeout)
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, NAME],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        return self

    def _wait_ready(self, timeout: float) -> None:
        ready = [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                output = (self.dir / "postgres.log").read_text(errors="replace")
                raise RuntimeError(f"postgres exited at start:\n{output}")
            if subprocess.run(ready, check=False).returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"postgres did not answer on port {self.port} in {timeout} s")

    def version(self) -> str:
        found = subprocess.run(
            [str(self.bin / "postgres"), "--version"], capture_output=True, text=True, check=False
        )
        return found.stdout.strip()

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)
