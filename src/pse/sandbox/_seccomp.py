"""The seccomp filter of bwrap mode: syscalls a tool command never needs and a sandbox escape usually does.

Built with libseccomp (through `pyseccomp`, a ctypes binding), which knows every architecture's syscall
numbers, and handed to bwrap as a compiled BPF program (`--seccomp FD`). Denied calls fail with EPERM,
so a tool that probes for them gets an ordinary error, not a kill; `clone3` fails with ENOSYS, the
answer that makes glibc fall back to `clone`, whose namespace flags the filter can inspect.
"""

from __future__ import annotations

import errno
import functools
import tempfile
from typing import IO

__all__ = ["DENIED_SYSCALLS", "NAMESPACE_FLAGS", "seccomp_problem", "write_filter"]

DENIED_SYSCALLS: tuple[str, ...] = (
    # mounting and changing the root: the sandbox's file view is fixed by bwrap
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr",
    # new namespaces or joining others' (clone's namespace flags are filtered below)
    "unshare", "setns",
    # looking into or changing other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # kernel keyrings, eBPF, perf, userfaultfd: the usual kernel exploit primitives
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    # the kernel itself: modules, kexec, reboot, swap, clocks, accounting, raw I/O ports
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "acct",
    "iopl", "ioperm", "syslog", "quotactl", "lookup_dcookie", "personality",
    # file handles bypass path checks (the classic container escape)
    "open_by_handle_at", "name_to_handle_at",
)  # fmt: skip
"""Every call here fails with EPERM inside bwrap."""

NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
"""`clone` with any of these flags fails with EPERM: no command creates a namespace of its own."""


def _build() -> object:
    import pyseccomp as seccomp  # lazily: it loads libseccomp.so.2 when imported

    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except OSError:  # a syscall this architecture does not have (e.g. iopl on aarch64)
            continue
    for flag in NAMESPACE_FLAGS.values():
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    return rules


@functools.cache
def seccomp_problem() -> str | None:
    """None when the filter can be built here; otherwise why not (libseccomp missing, say)."""
    try:
        with tempfile.TemporaryFile() as probe:
            write_filter(probe)
    except (ImportError, OSError) as exc:
        return (
            f"the seccomp filter cannot be built ({type(exc).__name__}: {exc}); install libseccomp "
            "(Debian/Ubuntu: apt-get install libseccomp2) and the pyseccomp package"
        )
    return None


def write_filter(stream: IO[bytes]) -> None:
    """Write the compiled BPF program into `stream` and rewind it, ready for `bwrap --seccomp FD`."""
    rules = _build()
    rules.export_bpf(stream)  # type: ignore[attr-defined]
    stream.flush()
    stream.seek(0)
