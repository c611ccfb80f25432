"""What the engine needs for one run, wired by the runner. Interfaces, not implementations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from autogen_agentchat.base import ChatAgent

from pse.config import Settings
from pse.engine._gates import GatePolicy
from pse.events import Event, SandboxRecord, ToolCallRecord
from pse.exceptions import RunFailure
from pse.team import RoleSetup

__all__ = ["PriceFn", "RunSetup", "ToolRuntime"]


class ToolRuntime(Protocol):
    """The part of the ToolAgent's executor the engine uses."""

    @property
    def records(self) -> Sequence[ToolCallRecord]:
        """Every tool decision so far, in order (the audit)."""
        ...

    @property
    def infrastructure_error(self) -> RunFailure | None:
        """Set when the sandbox itself failed; the run must end as ERROR."""
        ...

    def new_cycle(self) -> None:
        """Reset the per-cycle call budgets."""
        ...

    def role_written_config(self) -> Mapping[str, str]:
        """Check-configuration files in the workspace that a role wrote, with their author."""
        ...


PriceFn = Callable[[str, int, int], tuple[float, str, bool]]
"""Money for (role, prompt tokens, completion tokens) of that role's model: (amount, currency, priced)."""


@dataclass
class RunSetup:
    """Everything one run is made of. The runner builds it; the engine only uses it."""

    run_id: str
    task: str
    task_message: str
    roles: Sequence[RoleSetup]
    tool_agent: ChatAgent
    tools: ToolRuntime
    workspace: Path
    run_dir: Path
    settings: Settings
    gates: GatePolicy = field(default_factory=GatePolicy)
    inputs: dict[str, str] = field(default_factory=dict)
    price: PriceFn | None = None
    model_names: dict[str, str] = field(default_factory=dict)
    positions: Callable[[], dict[str, int]] | None = None
    on_event: Callable[[Event], None] | None = None
    sandbox: SandboxRecord | None = None
    """Which sandbox runs the tool commands (recorded in the trace)."""
    injected_retrievals: Sequence[tuple[str, list[dict[str, Any]]]] = ()
    """(query, citations) retrieved before the run and put in the task message; filed in cycle 1."""
