"""`pse serve`: the web dashboard, with a busy or impossible port said in one line (exit 2)."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from typing import Annotated

import typer

from pse.cli._common import RunsDir, TasksDir, command_settings
from pse.exceptions import UserError

__all__ = ["check_port", "serve_cmd"]

_PORTS = range(1, 65536)


def check_port(host: str, port: int) -> None:
    """Bind `host:port` once and let it go, so a port uvicorn cannot have is a usage error, not its log.

    Raises:
        UserError: the port is out of range, the host does not resolve, or the address is taken or
            not ours to bind (the message says which, and what to pass instead).
    """
    if port not in _PORTS:
        raise UserError(f"--port {port} is not a port: pass one from 1 to 65535 (the default is 8080)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise UserError(f"--host {host!r} is no address of this machine ({exc.strerror})") from exc
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UserError(
                    f"port {port} on {host} is in use (another `pse serve`?); stop that process, or pass "
                    f"--port with a free one (e.g. --port {port + 1 if port < 65535 else 8080})"
                ) from exc
            raise UserError(
                f"cannot listen on {host}:{port}: {exc.strerror}; pass another --host or --port"
            ) from exc


def serve_cmd(
    host: Annotated[str, typer.Option(help="Bind address; non-loopback needs PSE_WEB_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (1-65535).")] = 8080,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    repo: Annotated[
        list[Path] | None,
        typer.Option(
            "--repo",
            help="A git repository the Start form may start runs on (repeat for more).",
        ),
    ] = None,
) -> None:
    """Serve the web dashboard: live runs, history, trace explorer and metrics."""
    from pse.web import serve

    settings = command_settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    check_port(host, port)
    try:
        serve(settings, host=host, port=port, repositories=repo or ())
    except SystemExit as exc:  # uvicorn exits 3 when it cannot start: a usage error here, not a run's ERROR
        if exc.code in (0, None):
            raise
        raise UserError(
            f"the dashboard could not start on {host}:{port} (uvicorn's message above says why); "
            "pass another --host or --port"
        ) from None
