"""Who works in a run, wired: each role's setup, the ToolAgent beside them, their contexts, the run's control.

The crew's *shape* (its phases, their order, who judges) is data, `roles.CrewSpec`; this module holds
what the runner wired for it: the AutoGen side the loop runs phases with. A step's seats are built once
per run and step (`StepWiring.seat`), so a retried step resets its group chats instead of building them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from autogen_agentchat.base import ChatAgent

from pse.engine._events import RunEvents
from pse.engine._ledger import Ledger
from pse.engine._state import StateMachine
from pse.engine._stop import RunStop
from pse.team import ContextFactory, RoleSetup

__all__ = ["Crew", "RunControl", "StepCrew", "StepScope", "StepWiring"]


@dataclass(frozen=True)
class StepScope:
    """What a step's ToolAgent enforces: the step its calls belong to, and (for its worker) the only
    paths `write_file` may write."""

    step: str
    outputs: frozenset[str] | None = None
    """None: writes are not narrowed (the step's review)."""


@dataclass(frozen=True)
class StepCrew:
    """What the runner gives step mode: each role's setup for a step (its own cassette stream and
    client), and a ToolAgent that enforces a `StepScope`."""

    role: Callable[[str, str], RoleSetup]
    tool_agent: Callable[[StepScope], ChatAgent]


@dataclass
class StepWiring:
    """Step mode's seats: per (role, step) a setup and per scope a ToolAgent, each built once per run."""

    crew: StepCrew
    _setups: dict[tuple[str, str], RoleSetup] = field(default_factory=dict)
    _agents: dict[StepScope, ChatAgent] = field(default_factory=dict)

    def seat(self, role: str, scope: StepScope) -> tuple[RoleSetup, ChatAgent]:
        """`role`'s setup for `scope`'s step and the ToolAgent that enforces `scope`: the same ones on a
        retry, so its group chat is reset, not built again."""
        key = (role, scope.step)
        if key not in self._setups:
            self._setups[key] = self.crew.role(role, scope.step)
        if scope not in self._agents:
            self._agents[scope] = self.crew.tool_agent(scope)
        return self._setups[key], self._agents[scope]


@dataclass(frozen=True)
class Crew:
    """Who works in a cycle: the roles' setups, the ToolAgent beside them, how their contexts open.

    Attributes:
        turns_per_cycle: PSE_TURNS_PER_CYCLE (a step's phase has as many).
        steps: step mode's seats (None: the task runs in one piece).
    """

    roles: Mapping[str, RoleSetup]
    tool_agent: ChatAgent
    contexts: ContextFactory
    turns_per_cycle: int
    steps: StepWiring | None = None


@dataclass(frozen=True)
class RunControl:
    """The run's state a cycle works against: the state machine, the ledger, the event sink, and the
    run's one stop (`RunStop`: why it stopped, the cycle's cancellation token)."""

    machine: StateMachine
    ledger: Ledger
    events: RunEvents
    stop: RunStop
