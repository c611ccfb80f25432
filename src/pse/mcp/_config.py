"""`[mcp.NAME]` of task.toml: one stdio MCP server a run starts in its sandbox. Pure data, no SDK.

```toml
[mcp.notes]
command = ["{python}", "{task_dir}/servers/notes.py"]   # argv; {python} is PSE's interpreter, isolated
env = { NOTES_LANG = "en" }                             # set over the scrubbed environment
cwd = "{workspace}"                                     # where it starts (the default)
workspace = "read-only"                                 # none | read-only (default) | read-write
network = false                                         # true: it needs the network ([sandbox] network)
```
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pse.tools import MCP_SERVER_NAME

__all__ = [
    "INSTALL_HINT",
    "PLACEHOLDERS",
    "McpServerSpec",
    "expand_command",
    "sdk_problem",
    "server_name_problem",
]

INSTALL_HINT = "pip install 'pse[mcp]'"
PLACEHOLDERS = ("python", "task_dir", "workspace")
"""What a server's command and cwd may name: PSE's interpreter (`python -I`), a private read-only copy of
the task folder, and the server's view of the workspace."""
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def sdk_problem() -> str | None:
    """None when the official MCP SDK is installed; else what to install."""
    if importlib.util.find_spec("mcp") is None:
        return f"MCP servers need the official MCP SDK, which is not installed: {INSTALL_HINT}"
    return None


def server_name_problem(name: str) -> str | None:
    """What is wrong with a server name (`[mcp.NAME]`), or None."""
    if MCP_SERVER_NAME.fullmatch(name):
        return None
    return (
        f"MCP server name {name!r} must start with a letter and hold only letters, digits, '_' and '-' "
        "(at most 32 characters): its tools are named mcp.NAME.TOOL"
    )


def _placeholders_known(value: str, what: str) -> str:
    unknown = sorted(set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS))
    if unknown:
        known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        raise ValueError(
            f"{what} {value!r} uses unknown placeholder(s) {unknown}; only {known} are filled in"
        )
    return value


class McpServerSpec(BaseModel):
    """One stdio MCP server of a task (docs/tools.md#mcp-tools)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[str] = Field(min_length=1, description="argv; {python}, {task_dir}, {workspace}")
    env: dict[str, str] = Field(default_factory=dict, description="variables over the scrubbed environment")
    cwd: str | None = Field(default=None, description="where it starts: {workspace} (default), {task_dir}/…")
    workspace: Literal["none", "read-only", "read-write"] = Field(
        "read-only",
        description="what the server sees of the workspace: nothing, the workspace read-only, or a copy "
        "whose changes PSE brings back after each call (its tools may then be granted read-write)",
    )
    network: bool = Field(False, description="the server needs the network; [sandbox] network must allow it")

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if not value[0].strip():
            raise ValueError("the command's program is empty; write e.g. command = ['{python}', 'server.py']")
        for arg in value:
            _placeholders_known(arg, "command argument")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(
                    f"env name {key!r} must be letters, digits and '_', not starting with a digit"
                )
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        if value is None:
            return None
        rest = value
        for head in ("{workspace}", "{task_dir}"):
            if value == head:
                return value
            if value.startswith(head + "/"):
                rest = value[len(head) + 1 :]
                break
        path = PurePosixPath(rest)
        if not rest or path.is_absolute() or ".." in path.parts or "{" in rest or "\\" in rest:
            raise ValueError(
                f"cwd {value!r} must be {{workspace}} or {{task_dir}}, optionally followed by "
                "/a/relative/path, or a path relative to the workspace, without '..'"
            )
        return value

    def start_dir(self) -> str:
        """Where the server starts, with placeholders for the sandbox to fill in."""
        if self.cwd is None:
            return "{workspace}"
        return self.cwd if self.cwd.startswith("{") else "{workspace}/" + self.cwd


def expand_command(command: list[str]) -> list[str]:
    """`{python}` as an argument of its own becomes PSE's interpreter in isolated mode (`python -I`);
    inside a longer argument it is the interpreter's quoted path. The sandbox fills in the others."""
    out: list[str] = []
    for arg in command:
        if arg == "{python}":
            out += [sys.executable, "-I"]
        else:
            out.append(arg.replace("{python}", shlex.quote(sys.executable)))
    return out
