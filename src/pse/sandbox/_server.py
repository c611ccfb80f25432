"""A long-lived process in the sandbox (an MCP server): a command's isolation, with its pipes kept open.

What it shares with a tool command (`_runner`): the mode (bwrap or fallback) and its namespaces, seccomp
filter, read-only system directories and private /tmp; the unprivileged identity; the scrubbed
environment; the rlimits set by `ulimit` just before exec (CPU seconds count over the process's whole
life); private read-only copies such as `{task_dir}`; the hidden paths masked; a kill of its whole
process group (and under bwrap its PID namespace) when it stops, and when the run is halted.

What differs:
  * it runs until `stop()`, not under the command timeout: each request to it has its own
    (`call_timeout`, the tool timeout cut by the run's wall-clock limit);
  * stdin and stdout are pipes the caller speaks over; stderr goes to a file (`stderr_tail`), bounded
    by the file-size limit;
  * its view of the workspace is fixed when it starts (`access`), or is a sealed `snapshot` (a check's
    product process: exactly the check's files, read-only, hashed in `SandboxedProcess.snapshot`):
      - "none": an empty directory;
      - "read-only": under bwrap the real workspace, bound read-only (it sees every change at once);
        under fallback a private copy, made equal to the workspace again before each request and never
        brought back;
      - "read-write": a private copy in both modes, refreshed before each request (`before_call`);
        after it, `after_call` brings back the changes PSE accepts, as for a read-write command;
  * `network=True` keeps the host's network under bwrap (fallback never isolates the network).

What it does NOT protect against, beyond what `_runner` says of commands: the process keeps state
between requests (memory, its private /tmp, a read-write copy between refreshes), so one caller can
leave something for the next; with `network=True` it reaches whatever the host reaches; under fallback
it has the host's network and files whatever `access` says (fallback is not isolation).

Start it from a thread that lives as long as the process: bwrap's `--die-with-parent` follows the
thread that started it, not the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from pse.exceptions import ToolInfrastructureError
from pse.sandbox._bwrap import (
    HANDSHAKE_TIMEOUT_S,
    bwrap_child_pid,
    drop_privileges,
    read_available,
    write_userns_maps,
)
from pse.sandbox._copies import Accept, Copy, Synced, copy_workspace, refresh_copy, sync_back
from pse.sandbox._env import scrubbed_environment
from pse.sandbox._identity import Identity
from pse.sandbox._launch import Launch, close_fds
from pse.sandbox._process import kill_group, limits_prefix, wait_gone
from pse.sandbox._runner import _INSIDE, Sandbox, _substitute
from pse.sandbox._snapshot import build_snapshot, unseal
from pse.sandbox._uids import lease_uid

__all__ = ["STDERR_TAIL_CHARS", "SandboxedProcess", "WorkspaceAccess", "start_process"]

WorkspaceAccess = Literal["none", "read-only", "read-write"]
"""What a long-lived process sees at the workspace's place: nothing, the workspace read-only, or a copy
whose changes come back through PSE's check."""
STDERR_TAIL_CHARS = 2000
"""How much of the end of a process's stderr `stderr_tail` gives (to say why it died)."""
_STOP_WAIT_S = 5.0
_LABELS = {"none": "none", "read-only": "ro", "read-write": "rw"}


class SandboxedProcess:
    """One process started by `start_process`; `stop()` ends it and everything it started."""

    def __init__(
        self,
        sandbox: Sandbox,
        proc: subprocess.Popen[bytes],
        scratch: tempfile.TemporaryDirectory[str],
        view: Path | None,
        stderr: IO[bytes],
        label: str,
        access: WorkspaceAccess,
    ) -> None:
        self.sandbox = sandbox
        self.access = access
        self.label = label
        """Which sandbox runs it, as in the audit's `sandbox` field (bwrap-ro, fallback-rw, …)."""
        self._proc = proc
        self._scratch = scratch
        self._view = view
        self._stderr = stderr
        self._child = proc.pid
        self._status_fd = -1  # bwrap's JSON status: the child's pid, then its exit code
        self._exit_code: int | None = None
        self._stopped = False
        self._lease = contextlib.ExitStack()  # fallback as root: the uid leased for the process's life
        self._identity = sandbox.identity
        self.snapshot: Mapping[str, Mapping[str, str]] = {}
        """The sha256 of each file of its sealed snapshot, by area (empty: it was given none)."""

    @property
    def stdin(self) -> IO[bytes]:
        assert self._proc.stdin is not None
        return self._proc.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self._proc.stdout is not None
        return self._proc.stdout

    def poll(self) -> int | None:
        """The exit code once the process has ended (under bwrap, its command's), else None."""
        code = self._proc.poll()
        if code is None or self._status_fd < 0:
            return code
        if self._exit_code is None:
            with contextlib.suppress(OSError):
                for line in read_available(self._status_fd).decode(errors="replace").splitlines():
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        self._exit_code = int(json.loads(line)["exit-code"])
        return self._exit_code if self._exit_code is not None else code

    def wait(self, timeout_s: float) -> int | None:
        """`poll`, after waiting up to `timeout_s` for the process to end."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=timeout_s)
        return self.poll()

    def call_timeout(self) -> tuple[float, str]:
        """How long the next request may take, and what running out means (the tool timeout, or the
        run's wall-clock limit when it comes first)."""
        if self.sandbox.halted is not None:
            return 0.0, self.sandbox.halted
        return self.sandbox._timeout()

    def stderr_tail(self, limit: int = STDERR_TAIL_CHARS) -> str:
        """The last `limit` characters the process wrote to stderr."""
        try:
            size = os.fstat(self._stderr.fileno()).st_size
            data = os.pread(self._stderr.fileno(), limit, max(size - limit, 0))
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", errors="replace")

    def before_call(self) -> Copy | None:
        """Make a copied view equal to the workspace again (None: the view is not a copy).

        Raises:
            ToolInfrastructureError: the copy could not be made.
        """
        if self._view is None:
            return None
        return refresh_copy(self.sandbox.workspace, self._view, self._identity)

    def after_call(self, copy: Copy | None, accept: Accept | None, *, keep: bool = True) -> Synced:
        """Bring back what the request changed in the copy, each change only if `accept` keeps it; nothing
        unless the process's access is read-write and `keep` (the request's grant may write)."""
        if copy is None or self.access != "read-write" or not keep:
            return Synced()
        return sync_back(copy, self.sandbox.workspace, accept)

    def kill(self) -> None:
        """Kill the process group now (its pipes stay open until `stop`; any thread may call this)."""
        if not self._stopped:
            kill_group(self._proc.pid)

    def stop(self) -> None:
        """Kill the process group (under bwrap the PID namespace goes with it) and drop its files."""
        if self._stopped:
            return
        self._stopped = True
        kill_group(self._proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=_STOP_WAIT_S)
        if self._child != self._proc.pid:
            wait_gone(self._child)
        with self.sandbox._lock:
            self.sandbox._running.discard(self._proc.pid)
        close_fds(self._status_fd)
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        snapshot = Path(self._scratch.name) / "snapshot"
        if snapshot.is_dir():
            unseal(snapshot)
        self._scratch.cleanup()
        self._lease.close()  # fallback as root: every process of the server's uid is gone, the uid free


def start_process(
    sandbox: Sandbox,
    argv: Sequence[str],
    *,
    access: WorkspaceAccess = "read-only",
    network: bool = False,
    private: Mapping[str, Path] | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    snapshot: Mapping[str, tuple[Path, Mapping[str, str]]] | None = None,
    shared: Mapping[str, Path] | None = None,
    ro_binds: Sequence[Path] = (),
    channel: tuple[int, int] | None = None,
) -> SandboxedProcess:
    """Start `argv` in `sandbox` with stdin and stdout as pipes.

    Args:
        argv: the command; `{workspace}` and `{NAME}` for each private directory are replaced by where
            the process sees them.
        access: its view of the workspace (module docstring).
        network: keep the host's network (bwrap; fallback always has it).
        private: NAME → a host directory the process gets a read-only copy of (e.g. the task folder).
        cwd: where it starts, with the same placeholders (default: its view of the workspace).
        env: variables set over the scrubbed environment.
        snapshot: a sealed snapshot in place of the workspace (a check's product process), as
            `Sandbox.run` takes it; `access` is then ignored.
        shared: NAME → a host directory the process reads and writes in place (`{NAME}`).
        ro_binds: extra host directories it may read in place under bwrap (PSE's package).
        channel: descriptors to be its stdin and stdout instead of pipes to PSE (a check's product
            talks to the check, not to PSE); the process owns them: PSE's copies are closed here.

    Raises:
        ToolInfrastructureError: the sandbox could not start it (bwrap failed, no such program).
    """
    options = _Options(
        access, network, private or {}, cwd, env or {}, snapshot, shared or {}, ro_binds, channel
    )
    try:
        return _start(sandbox, argv, options)
    finally:
        close_fds(*(channel or ()))  # the process has its own copies now, or was never started


@dataclass(frozen=True, slots=True)
class _Options:
    """What `start_process` was asked for, beside the command."""

    access: WorkspaceAccess
    network: bool
    private: Mapping[str, Path]
    cwd: str | None
    env: Mapping[str, str]
    snapshot: Mapping[str, tuple[Path, Mapping[str, str]]] | None
    shared: Mapping[str, Path]
    ro_binds: Sequence[Path]
    channel: tuple[int, int] | None


def _start(sandbox: Sandbox, argv: Sequence[str], options: _Options) -> SandboxedProcess:
    access = options.access
    if sandbox.halted is not None:
        raise ToolInfrastructureError(f"not started: {sandbox.halted}")
    lease = contextlib.ExitStack()
    identity = sandbox.identity
    if sandbox.mode == "fallback" and identity.switch:
        # A uid of its own for the server's whole life: no command can touch its files, and every
        # process it started dies with it (see `_uids`).
        uid = lease.enter_context(lease_uid(identity.uid + 1, sandbox.uid_pool))
        identity = Identity(uid, uid, True, leased=True)
    scratch = tempfile.TemporaryDirectory(prefix="pse-srv-")
    root = Path(scratch.name)
    launch: Launch | None = None
    try:
        if identity.switch:
            os.chmod(root, 0o711)  # the process's uid may enter, not list
        places: dict[str, str] = {}
        binds: list[tuple[str, str, bool]] = []
        for name, source in options.private.items():
            copied = copy_workspace(source, root / f"private-{name}", identity)
            places[name] = sandbox._place(copied.root, f"{_INSIDE}/{name}", binds, rw=False)
        for name, host in options.shared.items():
            places[name] = sandbox._place(host, f"{_INSIDE}/{name}", binds, rw=True)
        view: Path | None = None
        sealed = None
        if options.snapshot is not None:  # a check's product: exactly the check's files, read-only
            sealed = build_snapshot(root / "snapshot", options.snapshot)
            source_dir = sealed.roots["workspace"]
        elif access == "read-only" and sandbox.mode == "bwrap":
            source_dir = sandbox.workspace
        elif access == "none":
            source_dir = root / "workspace"
            source_dir.mkdir(mode=0o755)
            identity.chown(source_dir)
        else:
            source_dir = view = copy_workspace(sandbox.workspace, root / "workspace", identity).root
        places["workspace"] = str(sandbox.workspace if sandbox.mode == "bwrap" else source_dir)
        command = [_substitute(arg, places) for arg in argv]
        start_dir = _substitute(options.cwd, places) if options.cwd else places["workspace"]
        label = f"{sandbox.mode}-{_LABELS[access]}"
        if sandbox.mode == "fallback" and access == "read-only":
            label = "fallback-copy"
        if options.snapshot is not None:
            label = f"{sandbox.mode}-snapshot"
        home = root / "home"
        home.mkdir(mode=0o700)
        identity.chown(home)
        if sandbox.mode == "bwrap":
            launch = sandbox._bwrap(
                command,
                source_dir,
                access == "read-write" and options.snapshot is None,
                options.ro_binds,
                binds,
                root,
                network=options.network,
                chdir=start_dir,
                marker=False,
            )
            launch.label = label
        else:
            reach = sandbox.reaching()  # as root with PSE in a closed folder: its mirror
            reached = reach.argv(command) if reach is not None else command
            full = [*drop_privileges(identity), *limits_prefix(sandbox.limits), *reached]
            launch = Launch(full, Path(start_dir), str(home), label, reach=reach)
        stderr = (root / "stderr").open("w+b")
    except BaseException:
        if launch is not None:
            close_fds(launch.status_fd, launch.info_fd, launch.block_fd, *launch.pass_fds)
        scratch.cleanup()
        lease.close()
        raise
    environment = {**scrubbed_environment(launch.home), **options.env}
    if launch.reach is not None:
        environment["PATH"] = launch.reach.text(environment["PATH"])
    try:
        handle = _spawn(sandbox, launch, environment, scratch, view, stderr, options)
    except BaseException:
        lease.close()
        raise
    handle._lease = lease
    handle._identity = identity
    handle.snapshot = sealed.hashes if sealed is not None else {}
    return handle


def _spawn(
    sandbox: Sandbox,
    launch: Launch,
    env: dict[str, str],
    scratch: tempfile.TemporaryDirectory[str],
    view: Path | None,
    stderr: IO[bytes],
    options: _Options,
) -> SandboxedProcess:
    def fail(why: str) -> ToolInfrastructureError:
        stderr.close()
        scratch.cleanup()
        return ToolInfrastructureError(why)

    try:
        proc = subprocess.Popen(
            launch.argv, cwd=launch.cwd, env=env, stderr=stderr, start_new_session=True,
            pass_fds=launch.pass_fds, bufsize=0,
            stdin=subprocess.PIPE if options.channel is None else options.channel[0],
            stdout=subprocess.PIPE if options.channel is None else options.channel[1],
        )  # fmt: skip
    except OSError as exc:
        close_fds(launch.status_fd, launch.info_fd, launch.block_fd)
        raise fail(f"could not start {launch.argv[0]!r}: {exc}") from exc
    finally:
        close_fds(*launch.pass_fds)
    with sandbox._lock:
        sandbox._running.add(proc.pid)
    handle = SandboxedProcess(sandbox, proc, scratch, view, stderr, launch.label, options.access)
    handle._status_fd = launch.status_fd  # kept open: bwrap writes the exit code there at the end
    try:
        if launch.info_fd >= 0:
            write_userns_maps(launch.info_fd, launch.block_fd, sandbox.identity, HANDSHAKE_TIMEOUT_S)
        if launch.status_fd >= 0:
            handle._child = bwrap_child_pid(launch.status_fd, HANDSHAKE_TIMEOUT_S)
    except ToolInfrastructureError as exc:
        tail = handle.stderr_tail().strip()
        handle.stop()
        raise ToolInfrastructureError(f"{exc}{': ' + tail if tail else ''}") from None
    finally:
        close_fds(launch.info_fd, launch.block_fd)
    return handle
