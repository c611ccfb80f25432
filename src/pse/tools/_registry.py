"""The tool contract: a `ToolSpec` (name, parameters, allowed modes, a function) and the registry of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pse.events import OutcomeStatus
from pse.protocol import ParamSpec, ToolSignature
from pse.sandbox import Accept, Sandbox
from pse.tools._evidence import Manifest

__all__ = ["Author", "Mode", "ToolContext", "ToolFunction", "ToolOutcome", "ToolRegistry", "ToolSpec"]

Mode = Literal["read-only", "read-write"]


Author = Callable[[str, str], str]
"""(area, path) → who wrote that file: a role's name, or "task" for what the task seeded."""


def _seeded(area: str, path: str) -> str:
    return "task"


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool function may use: the workspace, its sandbox, and what the requester's grant allows.

    Attributes:
        workspace: the run workspace (real path).
        sandbox: runs commands confined to the workspace.
        writable: the requester's grant for this tool is read-write (in the workspace).
        checks: the task's named check commands (for `run_check`).
        inputs: the run's inputs by name: `read_file` of a name with no such file gives its text, raw.
        task_dir: the task's folder, readable by checks as `{task_dir}`.
        evaluation: the Evaluator's evaluation area (`@evaluation/...` paths), when this grant reaches it.
        evaluation_writable: this grant may write the evaluation area.
        accept: decides whether a changed path may be kept (check-configuration files are refused).
        check_config: the check-configuration files the task declares (they are used, and reported).
        pytest_plugins: the pytest plugins `run_pytest` loads besides PSE's (no other is loaded).
        author: who wrote a file, for the reports of check runs.
        evidence: the manifest of a check, built at the moment of the check (None: one from this
            context's own rules, every file no role wrote plus the declared configuration).
        ruff_fixes: `write_file` applies ruff's safe fixes to a Python file it writes in the workspace
            (the task requires ruff and `[verification] ruff_fix` is on; off when tools are replayed).
    """

    workspace: Path
    sandbox: Sandbox
    writable: bool = False
    checks: Mapping[str, str] = field(default_factory=dict)
    inputs: Mapping[str, str] = field(default_factory=dict)
    task_dir: Path | None = None
    evaluation: Path | None = None
    evaluation_writable: bool = False
    accept: Accept | None = None
    check_config: frozenset[str] = frozenset()
    pytest_plugins: tuple[str, ...] = ()
    author: Author = _seeded
    evidence: Callable[[], Manifest] | None = None
    ruff_fixes: bool = False


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool's structured result: status, the text the role sees, and facts for the engine's gates."""

    status: OutcomeStatus
    output: str
    facts: dict[str, Any] = field(default_factory=dict)
    sandbox: str | None = None
    truncated: bool = False


ToolFunction = Callable[..., ToolOutcome]
"""Called as `function(context, **arguments)`; every argument is text (the tool converts and validates)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its public name and parameters, the modes it may be granted in, and its function.

    A function may raise `pse.exceptions.SandboxViolation` (answered as denied) or `ValueError` with a
    message for the role (answered as an error); anything else is a bug and propagates.
    """

    name: str
    description: str
    params: tuple[ParamSpec, ...]
    function: ToolFunction
    modes: tuple[Mode, ...] = ("read-only",)

    @property
    def signature(self) -> ToolSignature:
        """What the DSML parser checks requests against."""
        return ToolSignature(self.name, self.params)


class ToolRegistry:
    """The tools the ToolAgent knows. A request for any other name is an `unknown_tool` error.

    Example:
        >>> registry = builtin_tools()
        >>> registry.register(ToolSpec("search_knowledge", "Search the task's knowledge base.",
        ...     (ParamSpec("query"), ParamSpec("k", required=False, default="5")), my_search))
    """

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ToolSpec, *, replace: bool = False) -> None:
        """Add a tool.

        Raises:
            ValueError: a tool of that name exists and `replace` is False.
        """
        if spec.name in self._specs and not replace:
            raise ValueError(f"tool {spec.name!r} is already registered; pass replace=True to swap it")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        """The tool of that name, or None."""
        return self._specs.get(name)

    def signatures(self) -> dict[str, ToolSignature]:
        """Name → signature of every registered tool, for `parse_tool_calls`."""
        return {name: spec.signature for name, spec in self._specs.items()}

    def copy(self) -> ToolRegistry:
        """An independent registry with the same tools (register into it without touching this one)."""
        return ToolRegistry(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)
