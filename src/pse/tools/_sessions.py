"""A pytest check as sessions: each author's tests apart, each measured from outside the product it tests.

The test files a check runs are grouped by who wrote them, by PSE's write records (the task's, each
role's; the Evaluator's own tests of its evaluation area are a group of their own). Each group is a
**session** of its own, and the sessions run at the same time: one author's test module cannot change
what another author's tests call, because nothing of it is in their processes.

A session is two sandboxed processes PSE starts side by side (`pse.product`):

* the **product process**, over a sealed snapshot of the workspace's admitted files: the delivered
  code, imported as a plain `python -c` in the workspace would, answering requests over a pipe;
* the **checking process**, over a snapshot holding the same files but other authors' tests and
  check configuration: pytest with the session's tests, which reach the delivered code only through
  proxies, and which writes the session's record to a third pipe that only it holds.

Both see one shared folder (pytest's temporary folders: a test hands the product a `tmp_path` file).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pse.exceptions import ToolInfrastructureError
from pse.product import CHECKER_MODULE, PRODUCT_BOOT
from pse.sandbox import start_process
from pse.tools._evidence import Manifest, is_test_file, test_side
from pse.tools._proof import Session
from pse.tools._record import RECORD_LIMIT, read_record
from pse.tools._registry import ToolContext

__all__ = ["SessionPlan", "plan_sessions", "run_session"]

_PSE_ROOT = Path(__file__).resolve().parent.parent.parent  # the folder that holds the `pse` package
_CALL_SHARE, _START_S = 0.8, 2.0
"""A call to the product may take this share of a command's timeout, less what starting takes: one that
hangs fails its test, and the session still ends, with every other test's result, before the command is
killed."""
_TASK = "task"


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """One author's tests: paths (node ids) inside their area, and whether the area is the Evaluator's."""

    author: str
    tests: tuple[str, ...]
    own: bool = False


def plan_sessions(
    manifest: Manifest, workspace_tests: list[str], own_tests: list[str], own_author: str
) -> list[SessionPlan]:
    """The sessions of one check: the workspace's tests by author (the task's first), then the own tests."""
    by_author: dict[str, list[str]] = {}
    for test in workspace_tests:
        by_author.setdefault(manifest.author(test.partition("::")[0]), []).append(test)
    ordered = sorted(by_author.items(), key=lambda item: item[0] != _TASK)
    plans = [SessionPlan(who, tuple(tests)) for who, tests in ordered]
    if own_tests:
        plans.append(SessionPlan(own_author, tuple(own_tests), own=True))
    return plans


def _mine(manifest: Manifest, path: str, author: str) -> bool:
    return manifest.author(path) in (_TASK, author)


def checker_files(manifest: Manifest, plan: SessionPlan) -> tuple[dict[str, str], list[str]]:
    """The workspace files the session's checking process sees (no other author's tests or check
    configuration), and those of them it imports itself (its author's and the task's tests' side)."""
    seen: dict[str, str] = {}
    native: list[str] = []
    for path, entry in manifest.area("workspace").items():
        side = test_side(path) or entry.kind == "config"
        if side and not _mine(manifest, path, plan.author if not plan.own else _TASK):
            continue  # another author's: not in this session at all
        if plan.own and (is_test_file(path) or PurePosixPath(path).name == "conftest.py"):
            continue  # the Evaluator's session runs its own tests only, and no conftest
        seen[path] = ""
        if side and path.endswith(".py"):
            native.append(path)
    return seen, native


class _Drain(threading.Thread):
    """Reads a pipe to its end (capped) while the command runs, so a long record never blocks it."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self._fd, self.data = fd, bytearray()
        self.start()

    def run(self) -> None:
        with os.fdopen(self._fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                if len(self.data) < RECORD_LIMIT:
                    self.data += chunk[: RECORD_LIMIT - len(self.data)]


def run_session(
    ctx: ToolContext, manifest: Manifest, plan: SessionPlan, pytest_args: list[str], roles_config: bool
) -> Session:
    """Run one session: its product process, its checking process with `pytest_args` (placeholders
    `{workspace}`, `{evaluation}`, `{shared}`), and its record. `roles_config`: the session uses check
    configuration a role wrote (pytest failing to start on it is the role's problem, not PSE's).

    Raises:
        ToolInfrastructureError: the sandbox, the product's server or pytest could not start.
    """
    shared = Path(tempfile.mkdtemp(prefix="pse-shared-"))
    os.chmod(shared, 0o1777)  # the checking and the product process may run as two uids
    request_r, request_w = os.pipe()
    answer_r, answer_w = os.pipe()
    report_r, report_w = os.pipe()
    try:
        product = start_process(
            ctx.sandbox,
            [sys.executable, "-c", PRODUCT_BOOT],
            snapshot={"workspace": (ctx.workspace, dict.fromkeys(manifest.area("workspace"), ""))},
            shared={"shared": shared},
            ro_binds=[_PSE_ROOT],
            channel=(request_r, answer_w),
        )
    except BaseException:
        for fd in (request_w, answer_r, report_r, report_w):
            os.close(fd)
        shutil.rmtree(shared, ignore_errors=True)
        raise
    drain = _Drain(report_r)
    argv, areas = _checker(ctx, manifest, plan, f"{answer_r},{request_w}", report_w)
    try:
        result = ctx.sandbox.run(
            [*argv, "--", *pytest_args], writable=False, ro_binds=[_PSE_ROOT], snapshot=areas,
            shared={"shared": shared}, pass_fds=[answer_r, request_w, report_w],
        )  # fmt: skip
    finally:
        product.stop()
        drain.join()
        shutil.rmtree(shared, ignore_errors=True)
    record = read_record(bytes(drain.data))
    said = product.stderr_tail().strip()
    unconfigured = not record.configured and not roles_config
    if not result.timed_out and (not record.started or record.no_product or unconfigured):
        # PSE's checking process writes `started` first of all, the product's server says hello before it
        # imports anything of the workspace, and pytest's configuration is PSE's and the task's: without
        # any of them, the check never got to run.
        why = record.no_product and f"the product process never started ({record.no_product})"
        raise ToolInfrastructureError(
            "pytest could not start in the sandbox ("
            + (why or "PSE's checking process never ran")
            + "); it said: "
            + ((said or result.output.strip())[-1500:] or f"nothing (exit code {result.exit_code})")
        )
    return Session(result, record, plan.author, said[-1500:], dict(product.snapshot.get("workspace", {})))


def _checker(
    ctx: ToolContext, manifest: Manifest, plan: SessionPlan, channel: str, report_fd: int
) -> tuple[list[str], dict[str, tuple[Path, dict[str, str]]]]:
    """The checking process's command (without pytest's arguments) and the snapshot it runs over."""
    seen, native = checker_files(manifest, plan)
    areas = {"workspace": (ctx.workspace, seen)}
    timeout = f"{max(ctx.sandbox.limits.timeout_s * _CALL_SHARE - _START_S, 1.0):g}"
    argv = [sys.executable, "-I", "-m", CHECKER_MODULE, "--channel", channel, "--report", str(report_fd)]
    argv += ["--call-timeout", timeout, "--area", "workspace={workspace}"]
    argv += [a for n in native for a in ("--native", "{workspace}/" + n)]
    if plan.own and ctx.evaluation is not None:
        own = dict.fromkeys(manifest.area("evaluation"), "")
        areas["evaluation"] = (ctx.evaluation, own)
        argv += ["--area", "evaluation={evaluation}"]
        argv += [a for n in own for a in ("--native", "{evaluation}/" + n)]
    return argv, areas
