"""How a prepared command is launched: its bwrap command line, its start, its timeout and kill, its output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pse.exceptions import ToolInfrastructureError
from pse.sandbox._bwrap import HANDSHAKE_TIMEOUT_S, bwrap_argv, write_userns_maps
from pse.sandbox._env import scrubbed_environment
from pse.sandbox._identity import Identity
from pse.sandbox._process import STARTED, kill_group, limits_prefix, read_capped, wait_gone
from pse.sandbox._reach import Reach
from pse.sandbox._seccomp import write_filter
from pse.sandbox._types import CommandResult, SandboxLimits
from pse.sandbox._uids import sweep_uid

__all__ = ["Launch", "Launcher", "close_fds"]


def _python_dirs() -> list[str]:
    """Directories the project's interpreter needs: the venv, its base installation, their real paths."""
    dirs = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(os.path.realpath(sys.executable)).parent.parent),
    }
    return sorted(d for d in dirs if d and os.path.isdir(d) and d != "/")


@dataclass(slots=True)
class Launch:
    """One prepared command: what to exec, where, as whom, and what it may leave behind."""

    argv: list[str]
    cwd: Path
    home: str
    label: str
    pass_fds: tuple[int, ...] = ()
    status_fd: int = -1
    info_fd: int = -1
    block_fd: int = -1
    marker_r: int = -1
    sweep_uid: int | None = None
    reach: Reach | None = None
    """Fallback as root: the mirror the command runs from (PATH names it too)."""


class Launcher:
    """Launches prepared commands for one workspace under fixed limits, and kills every one of them when
    halted. Thread-safe: it holds no per-command state, only the set of process groups running now.

    Args:
        workspace: the run workspace (its real path).
        limits: timeout, rlimits and output cap.
        identity: who commands run as (the sandbox's identity).
        hide: paths masked from every bwrap command.
    """

    def __init__(
        self, workspace: Path, limits: SandboxLimits, identity: Identity, hide: Sequence[Path]
    ) -> None:
        self.workspace = workspace
        self.limits = limits
        self.identity = identity
        self.hide = tuple(hide)
        """Paths no command may read: masked under bwrap; under fallback, checked unreadable."""
        self.deadline: float | None = None
        self.halted: str | None = None
        self._running: set[int] = set()
        self._lock = threading.Lock()

    def _bwrap(
        self,
        command: list[str],
        source: Path,
        writable: bool,
        ro_binds: Sequence[Path],
        binds: list[tuple[str, str, bool]],
        scratch: Path,
        *,
        network: bool = False,
        chdir: str | None = None,
        marker: bool = True,
    ) -> Launch:
        status_r, status_w = os.pipe()
        filter_file = (scratch / "seccomp.bpf").open("w+b")
        write_filter(filter_file)
        seccomp_fd = os.dup(filter_file.fileno())
        filter_file.close()
        launch = Launch([], self.workspace, "/tmp", "bwrap-rw" if writable else "bwrap-ro")
        fds = {"status": status_w, "seccomp": seccomp_fd}
        marker_w = None
        if marker:
            launch.marker_r, marker_w = os.pipe()
            fds["marker"] = marker_w
        if self.identity.switch:
            launch.info_fd, fds["info"] = os.pipe()
            fds["block"], launch.block_fd = os.pipe()
        argv = bwrap_argv(
            identity=self.identity,
            workspace=str(self.workspace),
            workspace_source=str(source),
            writable=writable,
            ro_dirs=[*_python_dirs(), *(os.path.realpath(p) for p in ro_binds)],
            binds=binds,
            tmp_bytes=self.limits.file_size_mb * 1024 * 1024,
            fds=fds,
            masks=[str(p) for p in self.hide if p.exists()],
            network=network,
            chdir=chdir,
        )
        launch.argv = [*argv, *limits_prefix(self.limits, marker_w), *command]
        launch.pass_fds = tuple(fds.values())
        launch.status_fd = status_r
        return launch

    def stop_at(self, deadline: float | None) -> None:
        """No command runs past `deadline` (a `time.monotonic()` instant: the run's wall-clock limit)."""
        self.deadline = deadline

    def halt(self, reason: str) -> None:
        """Kill every command running now, and start none after (the run was cancelled)."""
        self.halted = reason
        with self._lock:
            running = list(self._running)
        for pgid in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def _timeout(self) -> tuple[float, str]:
        """How long the next command may run, and what a kill at that time means."""
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left < self.limits.timeout_s:
                return max(left, 0.0), "the run's wall-clock limit (PSE_RUN_TIMEOUT_S) came"
        return self.limits.timeout_s, f"timed out after {self.limits.timeout_s:g} s"

    def _execute(self, launch: Launch, cap: int, stdin: bytes | None = None) -> CommandResult:
        env = scrubbed_environment(launch.home)
        if launch.reach is not None:
            env["PATH"] = launch.reach.text(env["PATH"])
        timeout, why = self._timeout()
        if self.halted is not None or timeout <= 0:
            reason = self.halted or why
            close_fds(launch.status_fd, launch.info_fd, launch.block_fd, launch.marker_r, *launch.pass_fds)
            return CommandResult(None, f"[not run: {reason}]", True, False, launch.label, 0, str(launch.cwd))
        started = time.perf_counter()
        with tempfile.TemporaryFile(prefix="pse-out-") as out:
            try:
                proc = subprocess.Popen(
                    launch.argv, cwd=launch.cwd, env=env,
                    stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True, pass_fds=launch.pass_fds,
                )  # fmt: skip
            except OSError as exc:
                close_fds(launch.status_fd, launch.info_fd, launch.block_fd, launch.marker_r)
                raise ToolInfrastructureError(f"could not start {launch.argv[0]!r}: {exc}") from exc
            finally:
                close_fds(*launch.pass_fds)
            try:
                if launch.info_fd >= 0:
                    write_userns_maps(launch.info_fd, launch.block_fd, self.identity, HANDSHAKE_TIMEOUT_S)
            except ToolInfrastructureError:
                kill_group(proc.pid)
                proc.wait()
                close_fds(launch.status_fd, launch.info_fd, launch.block_fd, launch.marker_r)
                raise
            close_fds(launch.info_fd, launch.block_fd)
            if stdin is not None and proc.stdin is not None:
                threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
            timed_out = False
            with self._lock:
                self._running.add(proc.pid)
            try:
                code: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out, code = True, None
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            finally:
                with self._lock:
                    self._running.discard(proc.pid)
            if self.halted is not None and not timed_out:
                timed_out, code, why = True, None, self.halted
            # Always kill the group: on timeout, and to end background children a finished command left.
            kill_group(proc.pid)
            if launch.sweep_uid is not None:
                # Fallback as root: the command's uid is its own; no process of it outlives the command,
                # not even one that left the group (setsid), before anything of the command is read.
                sweep_uid(launch.sweep_uid)
            try:
                if launch.status_fd >= 0:
                    # bwrap's child runs in a session of its own; it dies with bwrap, and its PID namespace
                    # with it. Its init exits only once every process of the namespace is gone.
                    wait_gone(self._check_bwrap_started(launch.status_fd, out))
                started_ok = _marker(launch.marker_r)
            finally:
                close_fds(launch.marker_r)
            ms = int((time.perf_counter() - started) * 1000)
            output, truncated = read_capped(out, cap)
        if not started_ok and not timed_out:
            raise ToolInfrastructureError(
                f"the sandbox ({launch.label}) could not start the command; it said: "
                f"{output.strip()[:1500] or f'nothing (exit code {code})'}"
            )
        if timed_out:
            output += f"\n[killed: {why}]"
        return CommandResult(code, output, timed_out, truncated, launch.label, ms, str(launch.cwd))

    @staticmethod
    def _check_bwrap_started(read_fd: int, out: IO[bytes]) -> int:
        """bwrap reports the child's pid on the status fd (returned); no pid means bwrap itself failed."""
        os.set_blocking(read_fd, False)
        chunks: list[bytes] = []
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
        os.close(read_fd)
        for line in b"".join(chunks).decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError):
                status = json.loads(line)
                if "child-pid" in status:
                    return int(status["child-pid"])
        out.seek(0)
        raise ToolInfrastructureError(
            f"bwrap failed to start the command: {out.read(2000).decode(errors='replace')}"
        )


def _marker(fd: int) -> bool:
    """Whether the launcher wrote `STARTED` (its pipe is closed: the command has exited)."""
    if fd < 0:
        return True
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == STARTED
    except (BlockingIOError, OSError):
        return False


def _feed(pipe: IO[bytes], data: bytes) -> None:
    """Write a command's stdin and close it (in a thread: a command that does not read must not block)."""
    with contextlib.suppress(OSError), pipe:
        pipe.write(data)


def close_fds(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
