"""Frames on a pipe, and the process flags that keep one end of it out of the other's reach.

A frame is a 4-byte big-endian length, then the body. Standard library only: the product process and
the HumanEval check load this module, and nothing of the untrusted side may be imported in its place.
"""

from __future__ import annotations

import os
import select
import struct
import sys
import time

__all__ = [
    "ChannelClosed",
    "ChannelTimeout",
    "make_undumpable",
    "prctl",
    "read_frame",
    "write_frame",
]

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
_HEADER = struct.Struct(">I")


class ChannelClosed(Exception):
    """The other end of a pipe closed it."""


class ChannelTimeout(Exception):
    """A pipe read or write missed its deadline."""


def _wait(fd: int, events: int, deadline: float | None) -> None:
    """Block until `fd` is ready for `events`; no deadline means wait forever."""
    if deadline is None:
        return
    poller = select.poll()
    poller.register(fd, events)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ChannelTimeout
        if poller.poll(max(1, int(remaining * 1000))):
            return


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    data = bytearray()
    while len(data) < size:
        _wait(fd, select.POLLIN, deadline)
        try:
            chunk = os.read(fd, min(size - len(data), 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise ChannelClosed
        data += chunk
    return bytes(data)


def read_frame(fd: int, limit: int, deadline: float | None = None) -> bytes:
    """One frame's body; `ChannelClosed` at a clean end of stream, ValueError over `limit` bytes."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    if size > limit:
        raise ValueError(f"a frame of {size} bytes is over the {limit}-byte limit")
    return _read_exact(fd, size, deadline)


def write_frame(fd: int, body: bytes, deadline: float | None = None) -> None:
    """Write one frame; a non-blocking `fd` lets the deadline bound a reader that stopped reading."""
    view = memoryview(_HEADER.pack(len(body)) + body)
    while view:
        _wait(fd, select.POLLOUT, deadline)
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        except BrokenPipeError as exc:
            raise ChannelClosed from exc
        view = view[written:]


def prctl(option: int, value: int) -> bool:
    """Linux prctl(2) through ctypes; False where it is missing or refused (the callers are best-effort)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here, not at the top: the product process loads this module and never calls it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        zero = ctypes.c_ulong(0)
        return int(libc.prctl(option, ctypes.c_ulong(value), zero, zero, zero)) == 0
    except (OSError, AttributeError):
        return False


def make_undumpable() -> bool:
    """Forbid processes of the same uid to read this one's memory and descriptors through /proc or to
    ptrace it: what the measuring side of a channel does before anything it does not trust runs."""
    return prctl(PR_SET_DUMPABLE, 0)
