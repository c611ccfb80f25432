"""The bubblewrap command line, and the user-namespace handshake bwrap needs when PSE runs as root.

Every bwrap command gets: all namespaces unshared (no network, own PID namespace, so the PSE process and
its environment are invisible), a new session (no terminal to inject into), death with its parent, all
capabilities dropped, the seccomp filter of `_seccomp`, a size-bounded private `/tmp`, `/proc` of its
own, a minimal `/dev`, no `/sys`, the system directories and the interpreter read-only, and the
workspace (or its private copy) at the workspace's real path.

As a normal user bwrap maps the user to itself in a new user namespace (`--unshare-user`) and forbids
nested ones (`--disable-userns`). As root that is not enough: the mapped process would still be host uid
0, which may write `/proc/sys`. So PSE writes the namespace's maps itself (`--userns-block-fd`): host
root stays root only for bwrap's own setup, and the command is switched by `setpriv` to the unprivileged
sandbox uid, mapped to the same host uid, with an empty bounding set; nested namespaces are denied by
the seccomp filter (bwrap cannot combine `--disable-userns` with a map written from outside).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from pse.exceptions import ToolInfrastructureError
from pse.sandbox._identity import Identity

__all__ = [
    "SYSTEM_DIRS",
    "bwrap_argv",
    "bwrap_child_pid",
    "drop_privileges",
    "parent_dirs",
    "read_available",
    "write_userns_maps",
]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
HANDSHAKE_TIMEOUT_S = 10.0
"""How long PSE waits for bwrap to report its child before it calls the sandbox broken."""


def parent_dirs(paths: Sequence[str]) -> list[str]:
    """Every ancestor of `paths` (not `/`), shallowest first. bwrap creates missing ones 0700, so a
    command that is not root could not reach a bind below them: PSE creates them 0755 first."""
    seen: dict[str, None] = {}
    for path in paths:
        for parent in reversed(Path(path).parents):
            if str(parent) != "/":
                seen[str(parent)] = None
    return list(seen)


def bwrap_argv(
    *,
    identity: Identity,
    workspace: str,
    workspace_source: str,
    writable: bool,
    ro_dirs: Sequence[str],
    binds: Sequence[tuple[str, str, bool]],
    tmp_bytes: int,
    fds: dict[str, int],
    masks: Sequence[str] = (),
    network: bool = False,
    chdir: str | None = None,
) -> list[str]:
    """The bwrap command that runs a command with `workspace_source` mounted at `workspace`.

    Args:
        identity: who the command runs as.
        workspace: where the command sees its workspace (the real workspace path).
        workspace_source: what is mounted there (the workspace, or its private copy).
        writable: mount it read-write.
        ro_dirs: host directories the command may read at their own paths (interpreter, task folder).
        binds: (source, destination, writable) extra mounts (outbox, private copies).
        tmp_bytes: size of the private /tmp.
        fds: the descriptors bwrap reads: `status`, `seccomp`, and as root `info` and `block`.
        masks: host paths the command must not read although they lie in a mounted directory (an
            evaluation's hidden checks, a package's answer data): an empty tmpfs over a directory,
            /dev/null over a file. Those outside every mount are not there to read anyway.
        network: keep the host's network namespace (an MCP server the task lets reach the network;
            tool commands never do).
        chdir: where the command starts (default: the workspace).
    """
    exe = shutil.which("bwrap") or "bwrap"
    argv = [exe, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
    if network:
        argv.append("--share-net")
    if identity.switch:
        argv += ["--userns-block-fd", str(fds["block"]), "--info-fd", str(fds["info"])]
        # setpriv needs these three to switch uid and empty the bounding set; it drops them itself.
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        argv += ["--cap-add", "CAP_SETPCAP"]
    else:
        argv += ["--uid", str(identity.uid), "--gid", str(identity.gid), "--disable-userns"]
        argv += ["--cap-drop", "ALL"]
    argv += ["--seccomp", str(fds["seccomp"]), "--json-status-fd", str(fds["status"])]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # /tmp first: workspaces and venvs often live under /tmp, and binds below it must survive.
    argv += ["--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    system = [d for d in SYSTEM_DIRS if os.path.exists(d)]
    for d in system:
        argv += ["--ro-bind", d, d]
    mounts = [(d, d, False) for d in ro_dirs] + [(workspace_source, workspace, writable), *binds]
    for parent in parent_dirs([dest for _, dest, _ in mounts]):
        if not any(parent == d or parent.startswith(d + "/") for d in system):
            argv += ["--perms", "0755", "--dir", parent]
    for source, dest, rw in mounts:
        argv += ["--bind" if rw else "--ro-bind", source, dest]
    mounted = [*system, *(dest for _, dest, _ in mounts)]
    for path in masks:
        if not any(path == d or path.startswith(d.rstrip("/") + "/") for d in mounted):
            continue
        if os.path.isdir(path):
            argv += ["--perms", "0000", "--tmpfs", path]
        else:
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--chdir", chdir or workspace, "--"]
    return argv + (drop_privileges(identity) if identity.switch else [])


def drop_privileges(identity: Identity) -> list[str]:
    """The `setpriv` prefix that makes a command unprivileged: as root, the sandbox uid with no
    capability and an empty bounding set; always no_new_privs (no setuid binary can raise it again)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # as root, `check_fallback_identity` refused to get here
        return []
    if not identity.switch:
        return [setpriv, "--no-new-privs", "--"]
    return [
        setpriv,
        f"--reuid={identity.uid}",
        f"--regid={identity.gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def write_userns_maps(info_fd: int, block_fd: int, identity: Identity, deadline_s: float) -> None:
    """Read the child pid bwrap reports on `info_fd`, write its uid/gid maps, and let it go on.

    The map keeps host root for bwrap's own setup (it must create its mount points) and maps the
    sandbox uid/gid to themselves; the command itself is switched to them before it starts.

    Raises:
        ToolInfrastructureError: bwrap reported nothing in time, or the maps could not be written.
    """
    data = b""
    deadline = time.monotonic() + deadline_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ToolInfrastructureError("bwrap did not report its child process in time")
        ready, _, _ = select.select([info_fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(info_fd, 65536)
        if not chunk:
            break
        data += chunk
    try:
        pid = int(json.loads(data.decode())["child-pid"])
    except (ValueError, KeyError, UnicodeDecodeError) as exc:
        raise ToolInfrastructureError(f"bwrap failed before it started a command: {data[:300]!r}") from exc
    try:
        for name, ident in (("uid_map", identity.uid), ("gid_map", identity.gid)):
            fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY)
            try:
                os.write(fd, f"0 0 1\n{ident} {ident} 1\n".encode())  # one write: the kernel takes one
            finally:
                os.close(fd)
    except OSError as exc:
        raise ToolInfrastructureError(
            f"could not map the sandbox uid {identity.uid} for bwrap: {exc}"
        ) from exc
    os.write(block_fd, b"1")


def read_available(fd: int) -> bytes:
    """What can be read from `fd` now, without waiting."""
    chunks: list[bytes] = []
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def bwrap_child_pid(status_fd: int, timeout_s: float) -> int:
    """The pid of bwrap's child, read from its JSON status descriptor (EOF first: bwrap failed)."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in data.decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError):
                status = json.loads(line)
                if isinstance(status, dict) and "child-pid" in status:
                    return int(status["child-pid"])
        left = deadline - time.monotonic()
        if left <= 0:
            raise ToolInfrastructureError("bwrap did not report its child process in time")
        ready, _, _ = select.select([status_fd], [], [], left)
        if ready:
            chunk = os.read(status_fd, 65536)
            if not chunk:
                raise ToolInfrastructureError("bwrap failed to start the process")
            data += chunk
