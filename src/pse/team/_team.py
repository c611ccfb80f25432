"""The roles' setups: what each LLM role is made of (name, system message, model client, a user's agent)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autogen_agentchat.base import ChatAgent, Handoff, Team
from autogen_core.code_executor import CodeExecutor
from autogen_core.models import ChatCompletionClient
from autogen_core.tools import BaseTool, StaticWorkbench, Workbench

from pse.exceptions import ConfigError
from pse.roles import ROLE_SPECS

__all__ = ["RoleSetup", "describe", "own_tools"]


@dataclass(frozen=True)
class RoleSetup:
    """What one LLM role is made of: its name, full system message and model client.

    `agent`, when given, is a user's own AutoGen `ChatAgent` that takes the role's seat instead of the
    `AssistantAgent` PSE builds: it gets the role's opening as its task and is policed like any role
    (its tool requests go through the ToolAgent under the role's policy, its final message through the
    engine's parser and gates). An agent that brings tools of its own is refused: it would run them in
    its own turn, outside the ToolAgent and the role's policy (`own_tools`). `teams` holds the role's
    group chats for the run (see `RoleTeam`).

    Raises:
        ConfigError: `agent` brings tools of its own.
    """

    name: str
    system_message: str
    client: ChatCompletionClient
    agent: ChatAgent | None = None
    teams: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        found = own_tools(self.agent) if self.agent is not None else []
        if found:
            raise ConfigError(
                f"agents: your agent for {self.name} ({type(self.agent).__name__}) brings its own tools: "
                f"{', '.join(found)}. In PSE a role asks for tools in its messages and the ToolAgent runs "
                "them under the role's policy; an agent's own tools would run inside its turn, outside that "
                "policy. Give the agent no tools (no tools, workbench, handoffs or code executor), and grant "
                "the role what it needs in the task's [policy]"
            )


def own_tools(agent: object, depth: int = 3) -> list[str]:
    """What an AutoGen agent would run by itself in its turn: its tools, workbenches, handoffs, code
    executor, and those of the agents of a team inside it (`SocietyOfMindAgent`), by name."""
    found: list[str] = []
    handoff_tools: set[str] = set()  # AutoGen lists each handoff as a tool too: name it once, as a handoff
    values = list(vars(agent).values()) if hasattr(agent, "__dict__") else []
    while values:
        value = values.pop(0)
        if isinstance(value, list | tuple | set | frozenset):
            values += list(value)
        elif isinstance(value, dict):
            values += list(value.values())
        elif isinstance(value, BaseTool):
            found.append(f"tool {value.name}")
        elif isinstance(value, StaticWorkbench):
            values += list(getattr(value, "_tools", []))
        elif isinstance(value, Workbench):
            found.append(f"workbench {type(value).__name__}")
        elif isinstance(value, Handoff):
            found.append(f"handoff to {value.target}")
            handoff_tools.add(f"tool {value.name}")
        elif isinstance(value, CodeExecutor):
            found.append(f"code executor {type(value).__name__}")
        elif isinstance(value, Team | ChatAgent) and depth > 0:
            found += own_tools(value, depth - 1)
    return [name for name in dict.fromkeys(found) if name not in handoff_tools]


def describe(role: str) -> str:
    """The one-line description AutoGen shows for a role's agent (its `RoleSpec`'s; else its name)."""
    spec = ROLE_SPECS.get(role)
    return spec.description if spec is not None else role
