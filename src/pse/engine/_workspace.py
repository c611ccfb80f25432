"""What PSE sees of the run's workspace: files as they are, read by code, never a role's word about them.

Every file here was written by a role, so it is read as untrusted: no link is followed, only regular
files are read, and a file too large is left to the checks. `Workspace` is the one place the loop looks:
for a phase's result (`Seen`: the plan's outputs that are missing or not code yet, whether a named test
exists, the hard gates over a review) and for an opening (what the outputs hold).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pse.engine._escalation import names_a_test
from pse.engine._gates import GatePolicy, evaluate_gates
from pse.engine._values import Final, Seen
from pse.events import GateRecord, PlanRecord, ToolCallRecord, VerdictRecord
from pse.protocol import SPEC_CONFLICT
from pse.roles import role_spec
from pse.sandbox import read_inside
from pse.tools import is_test_file, python_problem, test_names

__all__ = ["Workspace", "outputs_note", "unparsed_outputs"]

_PARSE_LIMIT = 2_000_000
"""A Python output larger than this is not parsed for the nudge (the checks still judge it)."""
_SHOWN_CHARS = 6000
"""At most this much of the outputs' text opens an Evaluator's phase (`outputs_note`); a file beyond it is
named with its size, to read with read_file."""


def _read_regular(workspace: Path, path: str, limit: int) -> bytes | None:
    """A role-written file's first `limit` bytes: no link followed, nothing but a regular file read."""
    try:
        fd = os.open(workspace / path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read(limit)


def _sha256(workspace: Path, path: str) -> str | None:
    """The sha256 of a role-written file, as a check's snapshot hashes it (None: not a regular file within
    `_PARSE_LIMIT`)."""
    data = _read_regular(workspace, path, _PARSE_LIMIT + 1)
    return hashlib.sha256(data).hexdigest() if data is not None and len(data) <= _PARSE_LIMIT else None


def unparsed_outputs(workspace: Path, paths: Sequence[str]) -> list[str]:
    """Why each of `paths` that is a Python file of the workspace is not yet code: it does not parse, a
    function of it holds only its docstring, or it reads a name nothing in it binds (`python_problem`,
    with the import from a module beside it that binds the name; one line each). A role
    wrote these files: a link is not followed, and a file that is not regular or is too large is left to
    the checks."""
    found = []
    for path in paths:
        if not path.endswith(".py"):
            continue
        source = _read_regular(workspace, path, _PARSE_LIMIT + 1)
        if source is None or len(source) > _PARSE_LIMIT:
            continue
        beside = (workspace / path).parent
        inside = beside.resolve().is_relative_to(workspace.resolve())
        problem = python_problem(path, source, beside if inside else None)
        if problem is not None:
            found.append(problem)
    return found


def outputs_note(workspace: Path, paths: Sequence[str], blind: bool = False) -> str | None:
    """What the plan's outputs hold as the Evaluator's phase starts, read by PSE (never the Specialist's
    word), up to `_SHOWN_CHARS` of text; an output that is missing, not text or too long is named so.
    The 1.5B model's Evaluator spent a turn on each file it read, one a turn.

    `blind` (the task wants the Evaluator's own tests): a test file is named with its tests, not shown.
    Shown them, the 1.5B model's Evaluator wrote the Specialist's tests back as its own on 9 of 12
    held-out test files (`write_file` now refuses a copy); read_file still shows one on request."""
    parts, room = [], _SHOWN_CHARS
    for path in paths:
        data = _read_regular(workspace, path, room + 1)
        if data is None:
            parts.append(f"{path}: not in the workspace")
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            parts.append(f"{path}: not text")
            continue
        if blind and is_test_file(path):
            parts.append(f"{path}: {test_names(text)}")
            continue
        if len(text) > room:
            parts.append(f"{path}: longer than shown here; read it with read_file")
            continue
        room -= len(text)
        fence = "````" if "```" in text else "```"
        parts.append(f"{path}:\n{fence}\n{text.rstrip()}\n{fence}")
    if not parts:
        return None
    return (
        "The outputs as they are in the workspace now (read by PSE as your phase starts):\n\n"
        + "\n\n".join(parts)
    )


class Workspace:
    """The run's workspace as the loop looks at it.

    Args:
        root: the workspace folder.
        gates: the task's hard gates (a step's review is held to `step_gates`: its outputs and criteria,
            the task's rules for configuration and findings, the same enforcement).
        written_config: check-configuration files of the workspace a role wrote, with the author.
    """

    def __init__(
        self, root: Path, gates: GatePolicy, written_config: Callable[[], Mapping[str, str]]
    ) -> None:
        self.root = root
        self.gates = gates
        self.step_gates = GatePolicy(
            check_config=gates.check_config,
            block_findings=gates.block_findings,
            enforced=gates.enforced,
            judge=gates.judge,
        )
        self._written_config = written_config

    def gate(
        self,
        verdict: VerdictRecord | None,
        plan: PlanRecord | None,
        calls: Sequence[ToolCallRecord],
        *,
        step: bool = False,
    ) -> GateRecord:
        """The hard gates over a review of `plan` (a step's part of it, with `step`)."""
        return evaluate_gates(
            verdict=verdict,
            plan=plan,
            tool_calls=calls,
            policy=self.step_gates if step else self.gates,
            workspace=self.root,
            role_written_config=self._written_config(),
        )

    def seen(
        self,
        role: str,
        final: Final,
        plan: PlanRecord | None,
        calls: Sequence[ToolCallRecord],
        *,
        step: bool = False,
    ) -> Seen:
        """What the decision may weigh of `role`'s `final`: for a worker's report (in a cycle), the plan's
        outputs still missing or not code; for a SPEC_CONFLICT, whether its test exists; for a judge's
        final, the hard gates over `plan` and `calls`."""
        kind = role_spec(role).final
        outputs = list(plan.outputs) if plan is not None and kind == "report" and not step else []
        blocked = final.blocked
        return Seen(
            missing=tuple(p for p in outputs if not (self.root / p).is_file()),
            broken=tuple(unparsed_outputs(self.root, outputs)),
            sha256=tuple((p, digest) for p in outputs if (digest := _sha256(self.root, p)) is not None),
            named_test=names_a_test(self.root, blocked.test or "")
            if blocked is not None and blocked.reason_code == SPEC_CONFLICT
            else True,
            gate=self.gate(final.verdict, plan, calls, step=step) if kind == "verdict" else None,
        )

    def shown(self, paths: Sequence[str]) -> str | None:
        """What `paths` hold now (`outputs_note`; blind to tests where the Evaluator owes its own)."""
        return outputs_note(self.root, paths, blind=self.gates.independent_tests)

    def text(self, path: str, limit: int) -> str | None:
        """The text of a file of the workspace (None: not a regular file reached through no link, or over
        `limit` bytes)."""
        data = read_inside(self.root, path, limit)
        return None if data is None or len(data) > limit else data.decode("utf-8", "replace")
