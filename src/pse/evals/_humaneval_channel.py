"""The channel between the HumanEval check and the candidate's process: plain values and the proxy.

The check script (`_humaneval_check.py`) is staged with this module and `pse.product._wire` (the frames
and process flags every measuring channel of PSE's uses) beside it, and loads them by path; the parent
speaks through `CandidateProcess`, the child (the script's `--serve` mode) answers through `read_frame`,
`write_frame` and `encode_value`. Standard library only, like the script.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

_WIRED = ("ChannelClosed", "ChannelTimeout", "read_frame", "write_frame", "prctl", "PR_SET_PDEATHSIG",
          "PR_SET_DUMPABLE", "PR_SET_NO_NEW_PRIVS")  # fmt: skip
if TYPE_CHECKING or __name__.startswith("pse."):  # imported from the package
    from pse.product._wire import (
        PR_SET_DUMPABLE,
        PR_SET_NO_NEW_PRIVS,
        PR_SET_PDEATHSIG,
        ChannelClosed,
        ChannelTimeout,
        prctl,
        read_frame,
        write_frame,
    )
else:  # loaded by path (`python -I`): `_wire.py` staged beside this module, or where the package has it

    def _wire() -> ModuleType:
        here = os.path.dirname(os.path.abspath(__file__))
        for path in (os.path.join(here, "_wire.py"), os.path.join(here, os.pardir, "product", "_wire.py")):
            spec = importlib.util.spec_from_file_location("_wire", path)
            if spec is not None and spec.loader is not None and os.path.isfile(path):
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
        raise ImportError(f"cannot load _wire.py: stage it beside {os.path.basename(__file__)}")

    _loaded = _wire()  # once: its exception classes are the ones its functions raise
    globals().update({name: getattr(_loaded, name) for name in _WIRED})

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_DEPTH",
    "MAX_REQUEST_BYTES",
    "PR_SET_DUMPABLE",
    "PR_SET_NO_NEW_PRIVS",
    "PR_SET_PDEATHSIG",
    "CandidateError",
    "CandidateProcess",
    "ChannelClosed",
    "ChannelTimeout",
    "Unsupported",
    "decode_value",
    "encode_value",
    "prctl",
    "read_frame",
    "write_frame",
]

MAX_REQUEST_BYTES = 64 << 20  # a call's pickled arguments (trusted, from the problem's test)
MAX_ANSWER_BYTES = 8 << 20  # one answer frame from the untrusted child
MAX_DEPTH = 200  # nesting of an encoded value
OUTPUT_TAIL_BYTES = 1024  # how much of the child's stdout/stderr the parent keeps
STOP_GRACE_S = 2.0  # waiting for a killed child and for the output drain

_HEX_INT = re.compile(r"-?[0-9a-f]+")
_CHECK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_humaneval_check.py")
"""The script whose `--serve` mode is the child: staged beside this module."""


class CandidateError(BaseException):
    """A proxied call gave no plain value: the candidate raised, timed out, died or broke the protocol.

    It derives from BaseException so that an `except Exception` in a problem's test cannot absorb it.
    """


class Unsupported(Exception):
    """The child cannot encode a result: its type is outside the protocol, or it is too deep or large."""


# --- values: tagged JSON, each node a [tag, payload] pair -----------------------------------------


def encode_value(value: object, depth: int = 0) -> list[Any]:
    """Child side: a result as tagged JSON. Subclasses of the built-ins are sent as their base value."""
    if depth > MAX_DEPTH:
        raise Unsupported(f"a result nested deeper than {MAX_DEPTH} levels")
    inner = depth + 1
    if value is None:
        return ["none", None]
    if isinstance(value, bool):
        return ["bool", bool(value)]
    if isinstance(value, int):
        return ["int", format(int(value), "x")]  # hex: no int-to-str digit limit
    if isinstance(value, float):
        return ["float", float(value).hex()]  # exact, and covers inf, -inf and nan
    if isinstance(value, str):
        return ["str", str(value)]
    if isinstance(value, bytes):
        return ["bytes", bytes(value).hex()]
    if isinstance(value, list | tuple | set | frozenset):
        tag = next(t for t in (list, tuple, frozenset, set) if isinstance(value, t)).__name__
        return [tag, [encode_value(item, inner) for item in value]]
    if isinstance(value, dict):
        return ["dict", [[encode_value(k, inner), encode_value(v, inner)] for k, v in value.items()]]
    raise Unsupported(f"a result of type {type(value).__module__}.{type(value).__qualname__}")


def decode_value(node: object, depth: int = 0) -> object:
    """Parent side: rebuild one encoded value as real built-in instances, or raise ValueError.

    Every payload's JSON type is checked exactly, so nothing but the listed built-ins can come out.
    """
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {MAX_DEPTH} levels")
    if type(node) is not list or len(node) != 2 or type(node[0]) is not str:
        raise ValueError("a value node is not a [tag, payload] pair")
    tag, payload = node
    if tag == "none" and payload is None:
        return None
    if tag == "bool" and type(payload) is bool:
        return payload
    if tag == "int" and type(payload) is str and _HEX_INT.fullmatch(payload):
        return int(payload, 16)
    if tag == "float" and type(payload) is str:
        return float.fromhex(payload)
    if tag == "str" and type(payload) is str:
        return payload
    if tag == "bytes" and type(payload) is str:
        return bytes.fromhex(payload)
    if type(payload) is not list:
        raise ValueError(f"a value tagged {tag[:40]!r} has an unexpected payload")
    items = [decode_value(item, depth + 1) for item in payload] if tag != "dict" else []
    if tag == "list":
        return items
    if tag == "tuple":
        return tuple(items)
    if tag == "set":
        return set(items)
    if tag == "frozenset":
        return frozenset(items)
    if tag == "dict":
        return dict(_decode_pair(pair, depth + 1) for pair in payload)
    raise ValueError(f"unknown value tag {tag[:40]!r}")


def _decode_pair(pair: object, depth: int) -> tuple[object, object]:
    if type(pair) is not list or len(pair) != 2:
        raise ValueError("a dict item is not a [key, value] pair")
    return decode_value(pair[0], depth), decode_value(pair[1], depth)


# --- parent: the proxy over the child --------------------------------------------------------------


class _OutputTail:
    """Drains the child's stdout and stderr so it never blocks on them, keeping only the last bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._tail = b""
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while chunk := os.read(self._fd, 1 << 16):
            self._tail = (self._tail + chunk)[-OUTPUT_TAIL_BYTES:]

    def text(self) -> str:
        self._thread.join(STOP_GRACE_S)
        return self._tail.decode("utf-8", errors="replace")


class CandidateProcess:
    """The candidate's entry point, served by a child process: calling this object proxies one call.

    Each call sends (seq, args, kwargs) pickled and waits at most `call_timeout` seconds for the answer
    with the same seq; the answer is decoded strictly. Any failure raises `CandidateError`; after a
    timeout or a protocol failure the child is killed and every later call fails at once.
    """

    def __init__(self, solution: str, entry_point: str, call_timeout: float) -> None:
        self._call_timeout = call_timeout
        self._seq = 0
        self._broken: str | None = None
        request_read, self._request_fd = os.pipe()
        self._answer_fd, answer_write = os.pipe()
        command = [sys.executable, "-I", _CHECK_SCRIPT, "--serve", solution, entry_point,
                   str(request_read), str(answer_write)]  # fmt: skip
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(request_read, answer_write),
            start_new_session=True,  # its own process group, so stop() reaches its children too
        )
        os.close(request_read)
        os.close(answer_write)
        os.set_blocking(self._request_fd, False)
        assert self._process.stdout is not None
        self._output = _OutputTail(self._process.stdout)

    def start(self) -> str | None:
        """Wait for the child to import the solution; the reason it could not, or None when ready."""
        try:
            hello = self._receive(time.monotonic() + self._call_timeout)
        except CandidateError as exc:
            return str(exc)
        if hello.get("kind") == "ready":
            return None
        if hello.get("kind") == "import_failed":
            return f"{hello.get('type')}: {hello.get('message')}"
        return self._fail("the solution process sent an unexpected first frame")

    def __call__(self, *args: Any, **kwargs: Any) -> object:
        if self._broken is not None:
            raise CandidateError(self._broken)
        self._seq += 1
        deadline = time.monotonic() + self._call_timeout
        request = pickle.dumps((self._seq, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            write_frame(self._request_fd, request, deadline)
        except ChannelTimeout:
            raise CandidateError(self._fail(f"call timed out after {self._call_timeout:g} s")) from None
        except ChannelClosed:
            raise CandidateError(self._fail(f"the solution process {self._exit_status()}")) from None
        answer = self._receive(deadline)
        kind = answer.get("kind")
        if kind == "value":
            try:
                return decode_value(answer.get("value"))
            except (ValueError, TypeError, OverflowError, RecursionError) as exc:
                raise CandidateError(self._fail(f"malformed result: {exc}")) from None
        if kind == "raised":
            raise CandidateError(f"candidate raised {answer.get('type')}: {answer.get('message')}")
        if kind == "unsupported":
            raise CandidateError(f"candidate returned an unsupported value: {answer.get('message')}")
        raise CandidateError(self._fail("the solution process sent an unknown answer kind"))

    def _receive(self, deadline: float) -> dict[str, Any]:
        """The next answer frame as a JSON object carrying the current seq, or CandidateError."""
        try:
            body = read_frame(self._answer_fd, MAX_ANSWER_BYTES, deadline)
        except ChannelTimeout:
            what = "call" if self._seq else "import of solution.py"
            raise CandidateError(self._fail(f"{what} timed out after {self._call_timeout:g} s")) from None
        except ChannelClosed:
            raise CandidateError(self._fail(f"the solution process {self._exit_status()}")) from None
        except ValueError as exc:
            raise CandidateError(self._fail(str(exc))) from None
        try:
            answer = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise CandidateError(self._fail("the solution process sent a malformed frame")) from None
        seq = answer.get("seq") if type(answer) is dict else None
        if type(seq) is not int or seq != self._seq:
            raise CandidateError(self._fail("the solution process answered out of sequence"))
        return answer  # type: ignore[no-any-return]

    def _fail(self, reason: str) -> str:
        """Mark the channel unusable (answers may be out of step now) and kill the child."""
        self._broken = self._broken or reason
        self.stop()
        return reason

    def _exit_status(self) -> str:
        try:
            code = self._process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            return "closed its answer channel"
        if code >= 0:
            return f"exited with code {code}"
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"

    def output_tail(self) -> str:
        """The end of what the child printed (after stop(), so the drain has finished)."""
        return self._output.text()

    def stop(self) -> None:
        """Kill the child's whole process group and reap it; safe to call more than once."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(STOP_GRACE_S)
        for fd in (self._request_fd, self._answer_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._request_fd = self._answer_fd = -1


def _reject_constant(name: str) -> object:
    """json.loads hook: NaN and Infinity literals are not how the protocol sends floats."""
    raise ValueError(f"JSON constant {name} is not part of the protocol")
