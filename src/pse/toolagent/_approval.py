"""Approval of risky tool calls: which calls a person must approve, and what the person is shown.

A grant may carry an `ApprovalRule` (task.toml: `approval = "never" | "always" | { … }`). The executor
asks the rule about every call the policy allowed; a call it matches is held, and the run's `Approver`
(the engine's approval desk) waits for a person's decision before the call runs or is denied. The rule
conditions (any one that matches holds the call):

    approval = { command = "rm |git push" }     # a regular expression searched in a bash command
    approval = { path = "*.toml" }              # a glob the path of a file tool matches
    approval = { outside_outputs = true }       # a write to a path the plan did not declare an output
    approval = { larger_than = 20000 }          # a write of more than this many bytes

Nothing here is a prompt: the role never learns a rule exists until a call of its is held.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pse.exceptions import SandboxViolation
from pse.tools import Tool, ToolContext, resolve_path

__all__ = [
    "APPROVAL_KEYS",
    "PREVIEW_CHARS",
    "ApprovalRule",
    "ApprovalVerdict",
    "Approver",
    "HeldCall",
    "approval_problem",
    "parse_approval",
    "preview_of",
]

APPROVAL_KEYS = ("command", "path", "outside_outputs", "larger_than")
"""The conditions an approval table may hold."""
PREVIEW_CHARS = 12_000
"""What a person is shown of a call (a diff, a command) is capped at this many characters."""
_FIX = 'write approval = "always" (or "never"), or a table: { command = "rm ", outside_outputs = true }'


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """When a call under one grant must wait for a person. `always`, or any of the conditions."""

    always: bool = False
    command: str | None = None
    path: str | None = None
    outside_outputs: bool = False
    larger_than: int | None = None

    def match(self, tool: str, arguments: Mapping[str, str], outputs: Sequence[str]) -> str | None:
        """What about this call needs approval (a short reason naming the condition), or None."""
        if self.always:
            return "always"
        if self.command is not None and tool == Tool.BASH:
            found = re.search(self.command, arguments.get("command", ""))
            if found is not None:
                return f"command matches {self.command!r} ({found.group(0)!r})"
        path = arguments.get("path", "").strip()
        if self.path is not None and path and fnmatch.fnmatchcase(path.lstrip("./"), self.path):
            return f"path {path} matches {self.path!r}"
        if tool == Tool.WRITE_FILE:
            if self.outside_outputs and _normal(path) not in {_normal(p) for p in outputs}:
                declared = ", ".join(outputs) or "none yet"
                return f"{path} is not an output the plan declared ({declared})"
            size = len(arguments.get("content", "").encode())
            if self.larger_than is not None and size > self.larger_than:
                return f"writes {size} bytes, more than {self.larger_than}"
        return None

    def describe(self) -> str:
        """The rule as task.toml writes it."""
        if self.always:
            return "always"
        parts = [
            f"{key} = {json.dumps(value)}"
            for key in APPROVAL_KEYS
            if (value := getattr(self, key)) not in (None, False)
        ]
        return "{ " + ", ".join(parts) + " }"


def _normal(path: str) -> str:
    return Path(path.strip()).as_posix().lstrip("/").removeprefix("./")


def approval_problem(value: object) -> tuple[str, str] | None:
    """What is wrong with an `approval` setting (message, fix), or None when it is one."""
    if value in ("never", "always"):
        return None
    if isinstance(value, str):
        return f"unknown approval {value!r}", _FIX
    if not isinstance(value, Mapping):
        return f"an approval is a word or a table, got {value!r}", _FIX
    unknown = [key for key in value if key not in APPROVAL_KEYS]
    if unknown:
        return f"unknown approval condition {unknown[0]!r}", f"the conditions are {', '.join(APPROVAL_KEYS)}"
    if not value:
        return "an empty approval table holds no call", _FIX
    for key in ("command", "path"):
        if key in value and (not isinstance(value[key], str) or not value[key]):
            return f"approval {key} is a non-empty string, got {value[key]!r}", _FIX
    if "command" in value:
        try:
            re.compile(value["command"])
        except re.error as exc:
            return f"approval command {value['command']!r} is not a regular expression: {exc}", _FIX
    if "outside_outputs" in value and not isinstance(value["outside_outputs"], bool):
        return f"outside_outputs is true or false, got {value['outside_outputs']!r}", _FIX
    size = value.get("larger_than")
    if "larger_than" in value and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        return f"larger_than is a whole number of bytes >= 0, got {size!r}", "write e.g. larger_than = 20000"
    return None


def parse_approval(value: object) -> ApprovalRule | None:
    """The rule of a checked `approval` setting; None for "never" (see `approval_problem`)."""
    if value == "never" or value is None:
        return None
    if value == "always":
        return ApprovalRule(always=True)
    assert isinstance(value, Mapping)
    return ApprovalRule(
        command=value.get("command"),
        path=value.get("path"),
        outside_outputs=bool(value.get("outside_outputs", False)),
        larger_than=value.get("larger_than"),
    )


@dataclass(frozen=True, slots=True)
class HeldCall:
    """A call waiting for a person: who asked for what, the rule that held it, and what they are shown.

    Attributes:
        rule: the grant's approval rule, as `approval.ROLE.TOOL`.
        fired: what about the call matched the rule.
        preview: for a write, the diff against the current file; else the command or the arguments.
        message: the requester's message that holds the call (as the ToolAgent read it).
    """

    requester: str
    tool: str
    arguments: dict[str, str]
    index: int
    rule: str
    fired: str
    preview: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalVerdict:
    """A person's decision on a held call (or the timeout's): run it, or deny it with the reason."""

    approved: bool
    by: str
    reason: str = ""
    id: str = ""
    """The approval's id in the trace (`trace.approvals`), kept on the call's audit record."""


class Approver(Protocol):
    """Who decides held calls (the engine's approval desk): the plan's outputs, and the decision."""

    def declared_outputs(self) -> Sequence[str]:
        """The paths the plan declared as outputs so far (none before a plan)."""
        ...

    async def decide(self, held: HeldCall) -> ApprovalVerdict:
        """Wait for the decision on `held` (a person's, a standing one, or the timeout's)."""
        ...


def preview_of(context: ToolContext, tool: str, arguments: Mapping[str, str]) -> str:
    """What a person sees of a call: a write's unified diff against the file as it is, a command as
    written, other calls' arguments. Capped at `PREVIEW_CHARS`."""
    if tool == Tool.WRITE_FILE:
        path = arguments.get("path", "")
        try:
            _, real, _ = resolve_path(context, path)
            before = real.read_text(encoding="utf-8", errors="replace") if real.is_file() else None
        except (SandboxViolation, OSError):
            before = None
        after = arguments.get("content", "")
        name = path.strip() or "(no path)"
        diff = difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}" if before is not None else "/dev/null",
            tofile=f"b/{name}",
        )
        text = "".join(line if line.endswith("\n") else line + "\n" for line in diff)
        text = text or f"(no change to {name})\n"
    elif tool == Tool.BASH:
        text = arguments.get("command", "")
    else:
        text = json.dumps(dict(arguments), indent=2, ensure_ascii=False)
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + f"\n… ({len(text) - PREVIEW_CHARS} more characters)\n"
    return text
