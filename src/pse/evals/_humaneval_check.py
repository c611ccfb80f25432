"""The hidden check for one HumanEval problem, run against an untrusted `solution.py`.

Usage (inside the evaluation sandbox, with only the interpreter and, beside this script, the channel
module `_humaneval_channel.py` and the frames module `_wire.py` it loads by path)::

    python -I _humaneval_check.py [--call-timeout S] SOLUTION_PY  < problem.json

stdin holds one JSON object {"task_id", "prompt", "test", "entry_point"} (other keys are ignored); it
is never written to disk. Exit status 0 and one line `PASSED <task_id>` only when the problem's own
`check(candidate)` returned; status 1 and `FAILED <task_id>: <reason>` when it did not; status 2 and
`ERROR: <reason>` when the problem or the solution path is unusable.

Why not HumanEval's own runner: it `exec`s the candidate in the process that runs `check`, so a
candidate can fake a pass (`os._exit(0)` at import, an object whose `__eq__` is always True, a patched
builtin, a printed success marker). Here the two never share a process:

  * the parent (this script, started by the harness) makes itself non-dumpable (so a same-uid process
    cannot read its memory or fds through /proc), points its fd 0 at /dev/null once the problem is
    read, runs the trusted `prompt` and `test`, and calls `check` with a proxy. It never imports or
    executes the candidate;
  * the child (`--serve`, started by the parent) imports `solution.py` and answers each proxied call
    over a dedicated pipe, never over its stdout; its stdout and stderr go to a capped tail;
  * the parent rebuilds every answer strictly as built-in values (None, bool, int, float, str, bytes,
    list, tuple, dict, set, frozenset, nested), so no candidate-defined `__eq__` reaches `check`.
    Anything else (malformed frame, an unsupported type, the child dying, a timeout) and any exception
    the candidate raised become a `CandidateError` in the parent, which `check` cannot mistake for
    its own expectations.

What this does NOT protect against: a candidate that hard-codes HumanEval's expected outputs; a child
that keeps CAP_SYS_PTRACE (root that could not switch to nobody, e.g. in a user namespace without that
uid mapped) reading the parent's memory; grandchildren that leave the child's process group; resource
exhaustion beyond the per-call timeout (the sandbox around this script bounds CPU, memory and time).
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import importlib.util
import json
import math
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, BinaryIO

CALL_TIMEOUT_S = 10.0  # per proxied call, and for the child's start-up (importing the solution)
MAX_PROBLEM_BYTES = 1 << 20  # stdin: HumanEval's largest problem is a few KB
MAX_OUTPUT_CHARS = 3000  # everything this script prints
MAX_MESSAGE_CHARS = 400  # one exception message from the child
NOBODY = 65534

_PROBLEM_KEYS = ("task_id", "prompt", "test", "entry_point")
_CHANNEL = "_humaneval_channel"
"""The module of the channel to the candidate's process, staged beside this script."""


def _load_beside(name: str) -> ModuleType:
    """The module `name`.py from this script's folder, loaded by its path: run as `python -I`, the
    script's folder is not on sys.path, and nothing else of the sandbox's may be imported in its place."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}: stage it beside {os.path.basename(__file__)}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING or __name__ != "__main__":  # imported from the package (the tests)
    from pse.evals._humaneval_channel import (
        MAX_ANSWER_BYTES,
        MAX_REQUEST_BYTES,
        PR_SET_DUMPABLE,
        PR_SET_NO_NEW_PRIVS,
        PR_SET_PDEATHSIG,
        CandidateError,
        CandidateProcess,
        ChannelClosed,
        Unsupported,
        encode_value,
        prctl,
        read_frame,
        write_frame,
    )
    from pse.evals._humaneval_channel import MAX_DEPTH as MAX_DEPTH  # re-exported: the codec, tested here
    from pse.evals._humaneval_channel import decode_value as decode_value
else:  # run as the script, in the parent and in the child alike
    _channel = _load_beside(_CHANNEL)
    globals().update({name: getattr(_channel, name) for name in _channel.__all__})


class ProblemError(Exception):
    """The problem on stdin or the solution path is unusable: the check cannot run at all (exit 2)."""


# --- child: import the solution and serve calls ---------------------------------------------------


def _drop_root() -> None:
    """Run the candidate as nobody when started as root: root's CAP_SYS_PTRACE would otherwise overrule
    the parent's non-dumpable flag and let it read the parent's memory (which holds the test).

    Best-effort: where a uid switch is refused (a user namespace without 65534), the child stays as is.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    steps: tuple[Callable[[], None], ...] = (
        lambda: os.setgroups([]),
        lambda: os.setgid(NOBODY),
        lambda: os.setuid(NOBODY),  # last: it takes away the right to do the others
    )
    for step in steps:
        with contextlib.suppress(OSError):
            step()


def _describe_exception(exc: BaseException) -> dict[str, str]:
    """An exception by name and message only: its type never crosses to the parent."""
    try:
        message = str(exc)[:MAX_MESSAGE_CHARS]
    except BaseException:  # a candidate's __str__ may itself raise
        message = "<unprintable message>"
    return {"type": type(exc).__name__[:100], "message": message}


def _import_entry_point(solution: str, entry_point: str, source: bytes) -> Callable[..., object]:
    spec = importlib.util.spec_from_file_location("solution", solution)
    if spec is None:
        raise ImportError(f"no module spec for {solution}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    exec(compile(source, solution, "exec", dont_inherit=True), module.__dict__)
    function = getattr(module, entry_point, None)
    if not callable(function):
        raise AttributeError(f"solution.py defines no function {entry_point!r}")
    return function  # type: ignore[no-any-return]


def _frame(seq: int, kind: str, **fields: object) -> bytes:
    return json.dumps({"seq": seq, "kind": kind, **fields}).encode()


def _answer(
    seq: int, function: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bytes:
    """The answer frame for one call: its value, the exception it raised, or why it cannot be sent."""
    try:
        result = function(*args, **kwargs)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included: all are the candidate's
        return _frame(seq, "raised", **_describe_exception(exc))
    try:
        body = _frame(seq, "value", value=encode_value(result))
    except (Unsupported, RecursionError, TypeError, ValueError) as exc:
        return _frame(seq, "unsupported", message=str(exc)[:MAX_MESSAGE_CHARS])
    if len(body) > MAX_ANSWER_BYTES:
        return _frame(seq, "unsupported", message=f"a result of {len(body)} bytes (over {MAX_ANSWER_BYTES})")
    return body


def serve(solution: str, entry_point: str, request_fd: int, answer_fd: int) -> int:
    """Child mode: import the solution, report readiness, then answer calls until the parent hangs up."""
    with open(solution, "rb") as handle:  # read before dropping root: the file may be root-only
        source = handle.read()
    _drop_root()
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid binary can hand the candidate privileges back
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid switch, which clears it
    try:
        function = _import_entry_point(solution, entry_point, source)
    except BaseException as exc:  # sys.exit() at the solution's top level included
        write_frame(answer_fd, _frame(0, "import_failed", **_describe_exception(exc)))
        return 0
    write_frame(answer_fd, _frame(0, "ready"))
    while True:
        try:
            request = read_frame(request_fd, MAX_REQUEST_BYTES)
        except ChannelClosed:
            return 0
        seq, args, kwargs = pickle.loads(request)  # trusted: the parent sends the test's arguments
        write_frame(answer_fd, _answer(seq, function, args, kwargs))


# --- parent: the proxy over the child --------------------------------------------------------------


# --- parent: the problem, the trusted code and the verdict ---------------------------------------


@dataclass(frozen=True)
class Problem:
    """One HumanEval problem as the harness passes it on stdin; all of it is trusted."""

    task_id: str
    prompt: str
    test: str
    entry_point: str


def read_problem(stream: BinaryIO) -> Problem:
    """Parse the problem JSON from stdin, or raise ProblemError saying what is wrong with it."""
    raw = stream.read(MAX_PROBLEM_BYTES + 1)
    if len(raw) > MAX_PROBLEM_BYTES:
        raise ProblemError(f"the problem on stdin is over {MAX_PROBLEM_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProblemError(f"stdin is not a JSON object: {exc}") from None
    if type(data) is not dict:
        raise ProblemError("stdin is not a JSON object")
    missing = [key for key in _PROBLEM_KEYS if type(data.get(key)) is not str]
    if missing:
        raise ProblemError(f"the problem on stdin lacks string field(s) {', '.join(missing)}")
    if not data["entry_point"].isidentifier():
        raise ProblemError(f"entry_point {data['entry_point'][:80]!r} is not a Python identifier")
    return Problem(**{key: data[key] for key in _PROBLEM_KEYS})


def load_check(problem: Problem) -> tuple[Callable[[object], object], dict[str, Any]]:
    """Run the trusted prompt (helpers such as `poly`, and a stub of the entry point) and test in one
    fresh namespace; return `check` and that namespace. Raises ProblemError when either fails."""
    namespace: dict[str, Any] = {"__name__": "humaneval_problem", "__builtins__": builtins}
    for label, source in (("prompt", problem.prompt), ("test", problem.test)):
        try:
            exec(compile(source, f"<{label}>", "exec", dont_inherit=True), namespace)
        except Exception as exc:
            raise ProblemError(f"the problem's {label} does not run: {type(exc).__name__}: {exc}") from None
    check = namespace.get("check")
    if not callable(check):
        raise ProblemError("the problem's test defines no check(candidate)")
    return check, namespace


def _test_line(exc: BaseException) -> str:
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == "<test>"]
    return f" (test line {lines[-1]})" if lines else ""


def _failure_reason(exc: BaseException) -> str:
    if isinstance(exc, CandidateError):
        return f"{exc}{_test_line(exc)}"
    message = str(exc)
    return f"{type(exc).__name__}{': ' + message if message else ''}{_test_line(exc)}"


def _printable(text: str, limit: int) -> str:
    """One line of at most `limit` characters: candidate text must not start a line of its own."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _emit(line: str, tail: str = "") -> None:
    """Print the verdict line, then (on failure) the child's output tail, each line prefixed."""
    out = _printable(line, MAX_OUTPUT_CHARS // 2)
    if tail.strip():
        tail_lines = [f"solution output| {_printable(t, 200)}" for t in tail.splitlines()[-10:]]
        out += "\n" + "\n".join(tail_lines)
    print(out[:MAX_OUTPUT_CHARS], flush=True)


def _make_undumpable() -> None:
    """Forbid same-uid processes (the child above all) to read this one's memory and fds via /proc."""
    prctl(PR_SET_DUMPABLE, 0)


def _detach_stdin() -> None:
    """Point fd 0 at /dev/null once the problem is read: the test is then not reachable through it."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def _solution_path(path: str) -> str:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ProblemError(f"solution {path!r} is not a readable file")
    return os.path.abspath(path)


def run_check(solution: str, call_timeout: float) -> int:
    """Parent mode: the exit status (0 passed, 1 failed, 2 could not check) after printing the verdict."""
    _make_undumpable()
    try:
        problem = read_problem(sys.stdin.buffer)
        _detach_stdin()
        solution = _solution_path(solution)
        check, namespace = load_check(problem)
    except ProblemError as exc:
        _emit(f"ERROR: {exc}")
        return 2
    candidate = CandidateProcess(solution, problem.entry_point, call_timeout)
    try:
        failure = _run_against(candidate, check, namespace, problem.entry_point)
    finally:
        candidate.stop()
    if failure is None:
        _emit(f"PASSED {problem.task_id}")
        return 0
    _emit(f"FAILED {problem.task_id}: {failure}", candidate.output_tail())
    return 1


def _run_against(
    candidate: CandidateProcess,
    check: Callable[[object], object],
    namespace: dict[str, Any],
    entry_point: str,
) -> str | None:
    """Why the candidate failed the check, or None when `check(candidate)` returned."""
    not_ready = candidate.start()
    if not_ready is not None:
        return f"solution.py not importable: {not_ready}"
    # HumanEval/33's test calls the entry point by name: in the original single namespace that name is
    # the candidate's function, so it must be the proxy here too (the prompt left a stub under it).
    namespace[entry_point] = candidate
    try:
        check(candidate)
    except BaseException as exc:  # any way out of check() but a return is a failure
        return _failure_reason(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    """Parent mode by default; `--serve SOLUTION ENTRY_POINT REQUEST_FD ANSWER_FD` is the child."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"] and len(argv) == 5:
        return serve(argv[1], argv[2], int(argv[3]), int(argv[4]))
    parser = argparse.ArgumentParser(description="Run a HumanEval problem's check against solution.py.")
    parser.add_argument("solution", help="path of the candidate's solution.py")
    parser.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT_S, help="seconds per call")
    options = parser.parse_args(argv)
    if not (math.isfinite(options.call_timeout) and options.call_timeout > 0):
        parser.error("--call-timeout must be a positive number of seconds")
    return run_check(options.solution, options.call_timeout)


if __name__ == "__main__":
    sys.exit(main())
