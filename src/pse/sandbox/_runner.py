"""Run one command confined to a run workspace: bubblewrap when it works here, a portable fallback when not.

What every command gets, in both modes:
  * an unprivileged identity: never root (see `_identity`); as a normal user, that user;
  * its own copy of the workspace when it may write: PSE applies the changes it accepts afterwards
    (see `_copies`), so no command ever writes the real workspace or a check-configuration file;
  * a timeout that kills its whole process group (and, under bwrap, its whole PID namespace);
  * resource limits set with `ulimit` just before the command is exec'd: CPU seconds, address space,
    largest file written, process count;
  * a scrubbed environment built from an allow-list (see `_env`), HOME and TMPDIR private;
  * output (stdout and stderr merged) read through a file and capped, keeping head and tail;
  * optionally an *outbox*, a directory outside the workspace where a check writes its report, and
    private read-only directories (the Evaluator's own tests) that no other command sees.

bwrap mode (see `_bwrap`): every namespace unshared (no network, own PID namespace: the PSE process and
its environment are invisible), a user namespace, all capabilities dropped, a seccomp filter against
the usual escape syscalls (see `_seccomp`), a size-bounded private /tmp, a new session, death with the
parent; only the system directories, the interpreter and the workspace are mounted, read-only unless
the command may write (then its private copy, read-write).

fallback mode: the command runs on the host in a private copy of the workspace (a read-only command's
copy is thrown away), through `setpriv`: no_new_privs always, and as root the sandbox uid with no
capability and an empty bounding set.

What this sandbox does NOT protect against (docs/security.md has the whole threat model):
  * fallback mode is not isolation: the command sees the host filesystem and network with the rights of
    its uid. As root PSE switches to PSE_SANDBOX_UID, so root-only files and the PSE process's
    environment are out of reach; as a normal user the command has that user's rights, including
    reading the PSE process's environment from /proc (secret *values* are still redacted from every
    tool output, see `pse.toolagent`). No seccomp filter, no private /tmp, no network isolation.
  * fallback mode cannot catch a child that leaves the process group (`setsid`); bwrap's PID namespace does.
  * RLIMIT_NPROC counts every process of the uid; memory limits are per process, not per tree.
  * bwrap mode shares the kernel: a kernel bug reachable through the allowed syscalls is not contained.
    /usr, /etc and the interpreter are readable. Disk I/O and CPU share are not limited beyond the timeout.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pse.exceptions import ToolInfrastructureError
from pse.sandbox._bwrap import drop_privileges
from pse.sandbox._copies import Accept, copy_workspace, sync_back
from pse.sandbox._hidden import check_hidden
from pse.sandbox._identity import DEFAULT_SANDBOX_UID, Identity, check_fallback_identity, closed_ancestor
from pse.sandbox._launch import Launch, Launcher, close_fds
from pse.sandbox._process import limits_prefix, read_outbox
from pse.sandbox._reach import Reach, reach_for
from pse.sandbox._seccomp import seccomp_problem
from pse.sandbox._snapshot import build_snapshot, unseal
from pse.sandbox._types import OUTBOX, CommandResult, SandboxLimits
from pse.sandbox._uids import DEFAULT_UID_POOL, lease_uid

__all__ = ["OUTBOX", "CommandResult", "Sandbox", "SandboxLimits", "bwrap_problem"]

_INSIDE = "/pse"  # where bwrap mounts the outbox and private directories


@functools.cache
def bwrap_problem(sandbox_uid: int = DEFAULT_SANDBOX_UID) -> str | None:
    """None when bwrap runs commands here as PSE would; otherwise why not (not installed, no user
    namespaces, no seccomp, no setpriv as root). Probed once per uid with a real command."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    problem = seccomp_problem()
    if problem is not None:
        return problem
    identity = Identity.for_commands(sandbox_uid)
    if identity.switch and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing; PSE needs it to run bwrap commands as an unprivileged uid"
    with tempfile.TemporaryDirectory(prefix="pse-probe-") as scratch:
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        try:
            box = Sandbox(
                workspace, SandboxLimits(timeout_s=20), "bwrap", sandbox_uid=sandbox_uid, probe=True
            )
            done = box.run([sys.executable, "-I", "-c", "pass"], writable=False)
        except ToolInfrastructureError as exc:
            return f"bwrap cannot create a sandbox here: {exc}"
    if done.exit_code != 0:
        return f"bwrap cannot create a sandbox here: {done.output.strip()[:300] or done.exit_code}"
    return None


class Sandbox(Launcher):
    """Runs commands for one workspace under fixed limits. Thread-safe: it holds no per-command state.

    What a command sees (its copy, snapshot, private folders, outbox, identity) is decided here; how it
    is launched, timed out and reaped is its `Launcher`'s.

    Args:
        workspace: the run workspace; commands start there.
        limits: timeout, rlimits and output cap.
        mode: `auto` (bwrap when it works here, else fallback), `bwrap` (required) or `fallback`.
        sandbox_uid: the uid commands run as when PSE runs as root.

    Raises:
        ToolInfrastructureError: `bwrap` was required but cannot run here.
        ConfigError: fallback as root, and the sandbox uid cannot start the interpreter.
    """

    def __init__(
        self,
        workspace: Path,
        limits: SandboxLimits,
        mode: Literal["auto", "bwrap", "fallback"] = "auto",
        *,
        sandbox_uid: int = DEFAULT_SANDBOX_UID,
        probe: bool = False,
        hide: Sequence[Path] = (),
        uid_pool: int = DEFAULT_UID_POOL,
    ) -> None:
        super().__init__(
            Path(os.path.realpath(workspace)),
            limits,
            Identity.for_commands(sandbox_uid),
            [Path(os.path.realpath(p)) for p in hide],
        )
        self.uid_pool = uid_pool
        """Fallback as root: how many uids from `sandbox_uid` on commands lease (see `_uids`)."""
        self._unreachable: str | None = None
        self._reached = True  # bwrap: unknown until a command or the run's start asks (`unreachable`)
        problem = None if probe else (bwrap_problem(sandbox_uid) if mode != "fallback" else "fallback chosen")
        if mode == "bwrap" and problem is not None:
            raise ToolInfrastructureError(
                f"PSE_SANDBOX=bwrap but {problem}; install it or set PSE_SANDBOX=fallback"
            )
        self.mode: Literal["bwrap", "fallback"] = "bwrap" if problem is None else "fallback"
        self.requested = mode
        self.why_not_bwrap = problem if mode == "auto" else None
        """Why `auto` fell back (None when it did not)."""
        self.reach: Reach | None = None
        """Fallback as root with PSE in a folder closed to other users: the mirror commands run from."""
        if self.mode == "fallback":
            self.reach = check_fallback_identity(self.identity)
            check_hidden(self.hide, self.identity, self.reach)
        elif not probe:
            self._reached = False

    @property
    def unreachable(self) -> str | None:
        """Why no command can run for this workspace at all (every command then raises it), with the fix;
        found out once, by starting one command, when the run starts or its first command does."""
        if not self._reached:
            self._reached = True
            self._unreachable = self._reach_workspace()
        return self._unreachable

    def _reach_workspace(self) -> str | None:
        """None when a command can be started with the workspace mounted; else why not and the fix.

        bwrap mounts the live workspace for commands that read it in place: under a folder the sandbox
        cannot enter (another user's, mode 0700), every command would fail before it starts. Said once,
        here, as the run starts, instead of as a failing check."""
        try:
            self._run(["/bin/true"], writable=False)
        except ToolInfrastructureError as exc:
            # bwrap's set-up enters folders as root (mapped into its namespace) or as the user it runs as
            closed = closed_ancestor(self.workspace, mapped=(os.geteuid(), self.identity.uid))
            where = f"{closed} is closed to it" if closed is not None else "a folder above it is closed to it"
            return (
                f"the sandbox cannot reach the run workspace {self.workspace} ({where}): {exc}. Fix: put "
                "the runs folder where every user may enter (--runs-dir DIR or PSE_RUNS_DIR, e.g. under "
                f"/tmp or /var/tmp){f', or let others through it: chmod o+x {closed}' if closed else ''}"
            )
        return None

    @property
    def warning(self) -> str | None:
        """One line a run prints at its start when commands are not isolated or cannot run at all (None
        under a working bwrap)."""
        if self.unreachable is not None:
            return (
                "warning: no tool command can run in this run; its first one will end it as ERROR: "
                + self.unreachable
            )
        if self.mode == "bwrap":
            return None
        why = (
            f"auto found no usable bubblewrap ({self.why_not_bwrap})"
            if self.why_not_bwrap
            else "PSE_SANDBOX=fallback"
        )
        return (
            f"warning: tool commands run WITHOUT isolation ({why}): as uid {self.identity.uid} they can "
            "read the host's files and reach the network, with no seccomp filter and no private /tmp. "
            "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) for isolation, or set "
            "PSE_SANDBOX=bwrap to require it."
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        writable: bool,
        ro_binds: Sequence[Path] = (),
        output_limit: int | None = None,
        private: Mapping[str, Path] | None = None,
        outbox: bool = False,
        accept: Accept | None = None,
        stdin: bytes | None = None,
        snapshot: Mapping[str, tuple[Path, Mapping[str, str]]] | None = None,
        shared: Mapping[str, Path] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> CommandResult:
        """Run `argv` in the workspace; never raises for the command's own failure.

        Args:
            argv: the command and its arguments (no shell unless argv asks for one). `{workspace}`,
                `{outbox}` and `{NAME}` for each private directory or snapshot area are replaced by
                where the command sees them.
            writable: the command may change the workspace (the grant's mode is read-write); its
                changes come back through `accept`.
            ro_binds: extra host directories the command may read in place (e.g. the task's folder).
            output_limit: characters of output to keep (default: the limits').
            private: NAME → a host directory the command gets a read-only copy of (no other command
                sees it), e.g. the Evaluator's evaluation area.
            outbox: give the command an empty directory outside the workspace; its files come back in
                `CommandResult.outbox` (a check writes its machine-readable report there).
            accept: decides, for each changed path, whether the change is kept (see `_copies`).
            stdin: what the command reads on its standard input (default: nothing, /dev/null).
            snapshot: run over a sealed snapshot instead of the live workspace (a check): area →
                (its live folder, the admitted paths). `workspace` replaces the workspace; every other
                area is `{NAME}`. The command sees nothing else of either; hashes come back in
                `CommandResult.snapshot`.
            shared: NAME → a host directory the command reads and writes in place (`{NAME}`): what a
                check shares with the product process it talks to (pytest's temporary folders).
            pass_fds: descriptors the command inherits, at the same numbers (a check's channel to its
                product, its report pipe). The sandbox owns them: each is closed in PSE once the command
                started, or could not be.

        Raises:
            ToolInfrastructureError: the sandbox itself could not be set up, or the command could not be
                started in it (a check that could not run is not a check that failed).
            SnapshotTooLarge: the snapshot's files exceed its size cap (the role's problem).
        """
        owned = list(pass_fds)  # `_run` hands them to the launch, which closes them; else they close here
        try:
            if self.unreachable is not None:
                raise ToolInfrastructureError(self.unreachable)
            return self._run(
                argv, writable=writable, ro_binds=ro_binds, output_limit=output_limit, private=private,
                outbox=outbox, accept=accept, stdin=stdin, snapshot=snapshot, shared=shared, pass_fds=owned,
            )  # fmt: skip
        finally:
            close_fds(*owned)

    def _run(
        self,
        argv: Sequence[str],
        *,
        writable: bool,
        ro_binds: Sequence[Path] = (),
        output_limit: int | None = None,
        private: Mapping[str, Path] | None = None,
        outbox: bool = False,
        accept: Accept | None = None,
        stdin: bytes | None = None,
        snapshot: Mapping[str, tuple[Path, Mapping[str, str]]] | None = None,
        shared: Mapping[str, Path] | None = None,
        pass_fds: list[int] | None = None,
    ) -> CommandResult:
        if snapshot is not None and writable:
            raise ValueError("a command over a snapshot is read-only")
        cap = output_limit or self.limits.output_limit
        with self._identity() as identity, tempfile.TemporaryDirectory(prefix="pse-sbx-") as scratch_name:
            scratch = Path(scratch_name)
            if identity.switch:
                os.chmod(scratch, 0o711)  # the command's uid may enter, not list
            places: dict[str, str] = {}
            binds: list[tuple[str, str, bool]] = []
            for name, source in (private or {}).items():
                copy = copy_workspace(source, scratch / f"private-{name}", identity)
                places[name] = self._place(copy.root, f"{_INSIDE}/{name}", binds, rw=False)
            sealed = None
            if snapshot is not None:
                try:
                    sealed = build_snapshot(scratch / "snapshot", snapshot)
                except OSError as exc:
                    raise ToolInfrastructureError(f"could not build the check's snapshot: {exc}") from exc
                for name, root in sealed.roots.items():
                    if name != "workspace":
                        places[name] = self._place(root, f"{_INSIDE}/{name}", binds, rw=False)
            for name, host in (shared or {}).items():
                places[name] = self._place(host, f"{_INSIDE}/{name}", binds, rw=True)
            box = scratch / "outbox"
            if outbox:
                box.mkdir(mode=0o700)
                identity.chown(box)
                places["outbox"] = self._place(box, f"{_INSIDE}/outbox", binds, rw=True)
            copied = None
            if sealed is None and (writable or self.mode == "fallback"):
                copied = copy_workspace(self.workspace, scratch / "workspace", identity)
            # `{workspace}`: where the command sees it (its private copy or the snapshot under fallback).
            seen = sealed.roots["workspace"] if sealed is not None else copied.root if copied else None
            places["workspace"] = str(seen if self.mode == "fallback" and seen else self.workspace)
            command = [_substitute(arg, places) for arg in argv]
            home = scratch / "home"
            home.mkdir(mode=0o700)
            identity.chown(home)
            try:
                if self.mode == "bwrap":
                    source = seen if seen is not None else self.workspace
                    launch = self._bwrap(command, source, writable, ro_binds, binds, scratch)
                else:
                    assert seen is not None
                    label = "fallback-rw" if writable else "fallback-snapshot" if sealed else "fallback-copy"
                    launch = Launch([], seen, str(home), label, reach=self.reaching(ro_binds))
                    launch.marker_r, marker_w = os.pipe()
                    launch.pass_fds = (marker_w,)
                    launch.argv = [
                        *drop_privileges(identity),
                        *limits_prefix(self.limits, marker_w),
                        *(launch.reach.argv(command) if launch.reach is not None else command),
                    ]
                launch.sweep_uid = identity.uid if identity.leased else None
                if pass_fds:
                    launch.pass_fds = (*launch.pass_fds, *pass_fds)
                    pass_fds.clear()  # the launch closes them from here on, whatever happens
                result = self._execute(launch, cap, stdin)
            finally:
                if sealed is not None:
                    unseal(scratch / "snapshot")
            if writable and copied is not None:
                synced = sync_back(copied, self.workspace, accept)
                result = _with(result, changes=synced.kept, refused=synced.refused)
            if outbox:
                result = _with(result, outbox=read_outbox(box))
            if sealed is not None:
                result = _with(result, snapshot=sealed.hashes, snapshot_missing=sealed.missing)
            return result

    def reaching(self, ro_binds: Sequence[Path] = ()) -> Reach | None:
        """The mirror a fallback command runs from (with the read-only folders it is given), or None.

        Raises:
            ToolInfrastructureError: the mirror could not be brought up to date.
        """
        if self.reach is None:
            return None
        if not ro_binds:
            return self.reach
        try:
            return reach_for(Path(self.reach.closed), ro_binds)
        except OSError as exc:
            raise ToolInfrastructureError(f"could not mirror {', '.join(map(str, ro_binds))}: {exc}") from exc

    @contextlib.contextmanager
    def _identity(self) -> Iterator[Identity]:
        """Who one command runs as: in fallback as root, a uid leased for it alone (see `_uids`)."""
        if self.mode != "fallback" or not self.identity.switch:
            yield self.identity
            return
        with lease_uid(self.identity.uid + 1, self.uid_pool) as uid:
            yield Identity(uid, uid, True, leased=True)

    def _place(self, host: Path, inside: str, binds: list[tuple[str, str, bool]], *, rw: bool) -> str:
        """Where the command sees `host`: bound at `inside` under bwrap, at its host path in fallback."""
        if self.mode == "bwrap":
            binds.append((str(host), inside, rw))
            return inside
        return str(host)


def _substitute(arg: str, places: Mapping[str, str]) -> str:
    for name, path in places.items():
        arg = arg.replace("{" + name + "}", path)
    return arg


def _with(result: CommandResult, **changes: object) -> CommandResult:
    return replace(result, **changes)  # type: ignore[arg-type]
