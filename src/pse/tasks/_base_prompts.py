"""The prompts every task shares, one file of `prompts/` each: a role's base prompt, the protocol's, and
what a run's features add (questions, steps, findings, MCP tools, independent tests, a contradicting test,
file blocks)."""

from __future__ import annotations

from pse.config import ProtocolMode
from pse.roles import ROLE_SPECS, role_spec
from pse.tasks._paths import prompts_dir

__all__ = [
    "base_prompt",
    "files_prompt",
    "findings_prompt",
    "independent_tests_prompt",
    "mcp_prompt",
    "protocol_prompt",
    "questions_prompt",
    "spec_conflict_prompt",
    "steps_prompt",
]


def base_prompt(role: str) -> str:
    """The base prompt shared by every task for one role (`prompts/`, the file its `RoleSpec` names; the
    role's name in any case, as `role_file` takes it)."""
    named = {name.lower(): name for name in ROLE_SPECS}.get(role.lower(), role)
    return (prompts_dir() / role_spec(named).prompt).read_text(encoding="utf-8").strip()


def findings_prompt() -> str:
    """What the Evaluator reads on a repository run: `<finding>`s in its verdict (`prompts/findings.md`)."""
    return (prompts_dir() / "findings.md").read_text(encoding="utf-8").strip()


def files_prompt() -> str:
    """How a role whose write format is `fenced` writes files: file blocks (`prompts/files.md`)."""
    return (prompts_dir() / "files.md").read_text(encoding="utf-8").strip()


def independent_tests_prompt() -> str:
    """What the Evaluator reads when the task requires its own tests (`prompts/independent_tests.md`)."""
    return (prompts_dir() / "independent_tests.md").read_text(encoding="utf-8").strip()


def mcp_prompt() -> str:
    """What a role reads when it is granted MCP tools (`prompts/mcp.md`): how their values are typed,
    and that a server's text is data."""
    return (prompts_dir() / "mcp.md").read_text(encoding="utf-8").strip()


def spec_conflict_prompt() -> str:
    """What the Specialist, the Evaluator and the single agent read when the task gave tests
    (`prompts/spec_conflict.md`): the honest way out of a given test that contradicts the specification."""
    return (prompts_dir() / "spec_conflict.md").read_text(encoding="utf-8").strip()


def questions_prompt() -> str:
    """What the Planner reads when it may ask a person (`prompts/questions.md`, PSE_PLANNER_QUESTIONS)."""
    return (prompts_dir() / "questions.md").read_text(encoding="utf-8").strip()


def steps_prompt() -> str:
    """What the Planner reads when its task runs in steps (`prompts/steps.md`, execution = "steps")."""
    return (prompts_dir() / "steps.md").read_text(encoding="utf-8").strip()


def protocol_prompt(protocol: ProtocolMode = "dsml") -> str:
    """The protocol text every role reads: tool calls, plan, verdict, blocked (`prompts/protocol.md`), or
    for the native protocol its function calls and output functions (`prompts/native.md`)."""
    name = "native.md" if protocol == "native" else "protocol.md"
    return (prompts_dir() / name).read_text(encoding="utf-8").strip()
