"""A throwaway PostgreSQL server for the store tests: Debian's server binaries, a temp dir, loopback.

`postgres_server` (session) starts one with `initdb`/`pg_ctl` as the `postgres` user when the tests run
as root (PostgreSQL refuses to run as root), on a free loopback port with trust authentication; each
`postgres_url` is a fresh database on it. Without the binaries the tests that need it are skipped with
the reason (CI installs the `postgresql` package, so there they run).
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
PG_BIN = next((d for d in _BIN_DIRS if (d / "initdb").is_file()), None)
needs_postgres = pytest.mark.skipif(
    PG_BIN is None, reason="PostgreSQL server binaries not installed (apt install postgresql)"
)
_databases = itertools.count(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self, root: Path) -> None:
        assert PG_BIN is not None
        self.root, self.port = root, _free_port()
        self.data = root / "data"
        self.user: str | None = None
        if os.geteuid() == 0:
            self.user = "postgres"
            pw = pwd.getpwnam(self.user)
            os.chown(root, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres", "-E", "UTF8")
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(root / "log"), "-w", "-t", "60",
            "-o", f"-p {self.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=200",
            "start",
        )  # fmt: skip

    def _run(self, tool: str, *args: str) -> None:
        assert PG_BIN is not None
        command = [str(PG_BIN / tool), *args]
        if self.user is not None:
            command = ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd=self.root)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = f"pse_test_{next(_databases)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if PG_BIN is None:
        pytest.skip("PostgreSQL server binaries not installed (apt install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="pse-pg-"))
    os.chmod(root, 0o755)
    server = PostgresServer(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return postgres_server.new_database()
