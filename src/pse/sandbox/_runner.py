"""Run one command confined to a run workspace: bubblewrap when it works here, a portable fallback when not.

What every command gets, in both modes:
  * a timeout that kills its whole process group (and, under bwrap, its whole PID namespace);
  * resource limits set with `ulimit` inside the sandbox, just before the command is exec'd: CPU seconds,
    address space, largest file written, process count;
  * a scrubbed environment built from an allow-list (PATH, LANG, LC_*, TZ), with anything that looks like
    a secret (KEY, TOKEN, SECRET, PASSWORD...) dropped even from those, HOME and TMPDIR pointed at a private
    temp dir, and the project's interpreter first on PATH (so `python`, `pytest`, `ruff` are ours);
  * output (stdout and stderr merged) read through a file and capped, keeping head and tail around a marker.

bwrap mode: all namespaces unshared (no network at all, own PID namespace), capabilities dropped, only the
system directories and the Python installation mounted read-only, a private tmpfs on /tmp, the workspace
bound read-write only when the grant is read-write, and the process dies with its parent.

fallback mode: a read-only command runs in a throwaway copy of the workspace (`fallback-copy`), so it cannot
change the real one through relative paths; a read-write command runs in the workspace itself.

What this sandbox does NOT protect against:
  * fallback mode is not isolation: the command sees the host filesystem and network with the rights of the
    PSE process. A hostile command can read files outside the workspace, write through an absolute path
    (even into the real workspace, if it guesses the path), or reach the network. Use bwrap for hostile code.
  * fallback mode cannot catch a child that leaves the process group (`setsid`); bwrap's PID namespace does.
  * RLIMIT_NPROC is per user and not enforced for root; memory limits are per process, not per tree.
  * bwrap mode still exposes /usr, /etc and the Python installation read-only, shares the kernel (no
    seccomp filter here), and does not limit disk I/O or wall-clock CPU share beyond the timeout.
  * paths are checked before a tool opens them; a concurrent read-write command could swap a symlink in
    between (a TOCTOU race) — only roles granted read-write commands can try that.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from pse.exceptions import ToolInfrastructureError

__all__ = ["CommandResult", "Sandbox", "SandboxLimits", "bwrap_problem", "scrubbed_environment"]

_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
_PROVIDER_PREFIXES = (
    "PSE_",
    "OPENAI_",
    "OLLAMA_",
    "DEEPSEEK_",
    "ANTHROPIC_",
    "AZURE_",
    "AWS_",
    "GOOGLE_",
    "HF_",
)
_KEEP = ("PATH", "LANG", "LANGUAGE", "TZ")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
_FALLBACK_PATH = "/usr/local/bin:/usr/bin:/bin"
GROUP_EXIT_WAIT_S = 2.0
"""After killing a command's process group, wait at most this long for its members to exit."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """The named limits of one command (see `Settings` for their meaning and defaults)."""

    timeout_s: float = 60.0
    cpu_s: int = 120
    memory_mb: int = 2048
    file_size_mb: int = 64
    max_processes: int = 256
    output_limit: int = 20_000

    @classmethod
    def from_settings(cls, settings: object) -> SandboxLimits:
        """Read the limits from a `pse.config.Settings` (duck-typed to keep this module free of config)."""
        return cls(
            timeout_s=float(getattr(settings, "tool_timeout_s")),  # noqa: B009
            cpu_s=int(getattr(settings, "tool_cpu_s")),  # noqa: B009
            memory_mb=int(getattr(settings, "tool_memory_mb")),  # noqa: B009
            file_size_mb=int(getattr(settings, "tool_file_size_mb")),  # noqa: B009
            max_processes=int(getattr(settings, "tool_max_processes")),  # noqa: B009
            output_limit=int(getattr(settings, "tool_output_limit")),  # noqa: B009
        )


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command did. `exit_code` is None when it timed out; `sandbox` names the mode that ran it."""

    exit_code: int | None
    output: str
    timed_out: bool
    truncated: bool
    sandbox: str
    ms: int
    cwd: str = ""


def scrubbed_environment(home: str, *, parent: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a command sees: an allow-list of the parent's, minus anything secret-looking."""
    source = dict(os.environ) if parent is None else parent
    env: dict[str, str] = {}
    for name, value in source.items():
        allowed = name in _KEEP or name.startswith("LC_")
        if allowed and not _SECRET.search(name) and not name.startswith(_PROVIDER_PREFIXES):
            env[name] = value
    interpreter_bin = str(Path(sys.executable).parent)
    env["PATH"] = interpreter_bin + os.pathsep + env.get("PATH", _FALLBACK_PATH)
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=home, TMPDIR=home, PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", TERM="dumb")
    return env


@functools.cache
def bwrap_problem() -> str | None:
    """None when bwrap runs here; otherwise why not (not installed, or it fails, e.g. no user namespaces)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    probe = [exe, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    probe += [a for d in _SYSTEM_DIRS if os.path.exists(d) for a in ("--ro-bind", d, d)] + ["true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create a sandbox here: {done.stderr.strip() or done.returncode}"
    return None


def _python_dirs() -> list[str]:
    """Directories the project's interpreter needs: the venv, its base installation, their real paths."""
    dirs = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(os.path.realpath(sys.executable)).parent.parent),
    }
    return sorted(d for d in dirs if d and os.path.isdir(d) and d != "/")


def _limits_prefix(limits: SandboxLimits) -> list[str]:
    # bash's ulimit units: -v in KiB, -f in 1024-byte blocks. Failing to set a limit refuses to run.
    script = (
        f"ulimit -t {limits.cpu_s} -v {limits.memory_mb * 1024} -f {limits.file_size_mb * 1024} "
        f'-u {limits.max_processes} || exit 125; exec "$@"'
    )
    return ["/bin/bash", "--noprofile", "--norc", "-c", script, "pse-sandbox"]


def _read_capped(stream: IO[bytes], limit: int) -> tuple[str, bool]:
    """Read a command's output file, keeping at most about `limit` characters (head and tail)."""
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    if size <= limit:
        return stream.read().decode("utf-8", errors="replace"), False
    keep = max(limit - 48, 0)
    head_n, tail_n = keep * 2 // 3, keep - keep * 2 // 3
    head = stream.read(head_n).decode("utf-8", errors="replace")
    stream.seek(size - tail_n)
    tail = stream.read(tail_n).decode("utf-8", errors="replace") if tail_n else ""
    return f"{head}\n[… truncated {size - head_n - tail_n} bytes …]\n{tail}", True


def _kill_group(pgid: int) -> None:
    """SIGKILL a process group, then wait (bounded) until no member still runs: none outlives the call."""
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    delay = 0.001
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        # The group still "exists" while it holds zombies (e.g. bwrap's intermediate process, orphaned to
        # an init that may never reap it); only members that still run matter.
        if not _live_members(pgid) or time.monotonic() >= deadline:
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _live_members(pgid: int) -> bool:
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


class Sandbox:
    """Runs commands for one workspace under fixed limits. Thread-safe: it holds no per-command state.

    Args:
        workspace: the run workspace; commands start there.
        limits: timeout, rlimits and output cap.
        mode: `auto` (bwrap when it works here, else fallback), `bwrap` (required) or `fallback`.

    Raises:
        ToolInfrastructureError: `bwrap` was required but cannot run here.
    """

    def __init__(
        self, workspace: Path, limits: SandboxLimits, mode: Literal["auto", "bwrap", "fallback"] = "auto"
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.limits = limits
        problem = bwrap_problem() if mode != "fallback" else "fallback forced"
        if mode == "bwrap" and problem is not None:
            raise ToolInfrastructureError(
                f"PSE_SANDBOX=bwrap but {problem}; install it or set PSE_SANDBOX=fallback"
            )
        self.mode: Literal["bwrap", "fallback"] = "bwrap" if problem is None else "fallback"

    def run(
        self,
        argv: Sequence[str],
        *,
        writable: bool,
        ro_binds: Sequence[Path] = (),
        output_limit: int | None = None,
    ) -> CommandResult:
        """Run `argv` in the workspace; never raises for the command's own failure.

        Args:
            argv: the command and its arguments (no shell unless argv asks for one).
            writable: whether the workspace may be changed (the grant's mode is read-write).
            ro_binds: extra directories the command may read (e.g. the task's checks folder).
            output_limit: characters of output to keep (default: the limits'); a tool that parses
                machine-readable output asks for more and caps its own rendering.

        Raises:
            ToolInfrastructureError: the sandbox itself could not be set up.
        """
        cap = output_limit or self.limits.output_limit
        with tempfile.TemporaryDirectory(prefix="pse-sbx-") as scratch:
            if self.mode == "bwrap":
                label = "bwrap-rw" if writable else "bwrap-ro"
                return self._run_bwrap(argv, writable, ro_binds, label, cap)
            if writable:
                return self._execute(list(argv), self.workspace, scratch, "fallback-rw", cap, status_fd=False)
            copy = Path(scratch) / "workspace"
            try:
                shutil.copytree(self.workspace, copy, symlinks=True)
            except (OSError, shutil.Error) as exc:
                raise ToolInfrastructureError(
                    f"could not copy the workspace for a read-only command: {exc}"
                ) from exc
            home = Path(scratch) / "home"
            home.mkdir()
            return self._execute(list(argv), copy, str(home), "fallback-copy", cap, status_fd=False)

    def _run_bwrap(
        self, argv: Sequence[str], writable: bool, ro_binds: Sequence[Path], label: str, cap: int
    ) -> CommandResult:
        exe = shutil.which("bwrap") or "bwrap"
        cmd = [exe, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
        cmd += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
        ]  # before any bind: workspaces and venvs often live under /tmp
        for d in _SYSTEM_DIRS:
            if os.path.exists(d):
                cmd += ["--ro-bind", d, d]
        for d in [*_python_dirs(), *(os.path.realpath(p) for p in ro_binds)]:
            cmd += ["--ro-bind", d, d]
        ws = str(self.workspace)
        cmd += ["--bind" if writable else "--ro-bind", ws, ws, "--chdir", ws]
        cmd += ["--json-status-fd", "{status_fd}", "--"]
        return self._execute([*cmd, *argv], self.workspace, "/tmp", label, cap, status_fd=True)

    def _execute(
        self, argv: list[str], cwd: Path, home: str, label: str, cap: int, *, status_fd: bool
    ) -> CommandResult:
        limits = self.limits
        env = scrubbed_environment(home)
        read_fd, write_fd = os.pipe() if status_fd else (-1, -1)
        if status_fd:
            argv = [str(write_fd) if a == "{status_fd}" else a for a in argv]
            bwrap_at = argv.index("--")
            argv = [*argv[: bwrap_at + 1], *_limits_prefix(limits), *argv[bwrap_at + 1 :]]
        else:
            argv = [*_limits_prefix(limits), *argv]
        started = time.perf_counter()
        with tempfile.TemporaryFile(prefix="pse-out-") as out:
            try:
                proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, pass_fds=(write_fd,) if status_fd else (),
                )  # fmt: skip
            except OSError as exc:
                raise ToolInfrastructureError(f"could not start {argv[0]!r}: {exc}") from exc
            finally:
                if status_fd:
                    os.close(write_fd)
            timed_out = False
            try:
                code: int | None = proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out, code = True, None
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            # Always kill the group: on timeout, and to end background children a finished command left.
            _kill_group(proc.pid)
            ms = int((time.perf_counter() - started) * 1000)
            if status_fd:
                self._check_bwrap_started(read_fd, out)
            output, truncated = _read_capped(out, cap)
        if timed_out:
            output += f"\n[killed: timed out after {limits.timeout_s:g} s]"
        return CommandResult(code, output, timed_out, truncated, label, ms, str(cwd))

    @staticmethod
    def _check_bwrap_started(read_fd: int, out: IO[bytes]) -> None:
        """bwrap reports the child's pid on the status fd; no pid means bwrap itself failed."""
        os.set_blocking(read_fd, False)
        chunks: list[bytes] = []
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
        os.close(read_fd)
        for line in b"".join(chunks).decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                if "child-pid" in json.loads(line):
                    return
        out.seek(0)
        raise ToolInfrastructureError(
            f"bwrap failed to start the command: {out.read(2000).decode(errors='replace')}"
        )
