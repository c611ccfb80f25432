"""The roles' system prompts: the task's prompt per role, what this run's features add, its tool catalog."""

from __future__ import annotations

from pse.config import Settings
from pse.exceptions import ConfigError
from pse.roles import Role, role_spec
from pse.runner._mcp import has_mcp_tools
from pse.tasks import (
    Task,
    files_prompt,
    findings_prompt,
    independent_tests_prompt,
    mcp_prompt,
    questions_prompt,
    seeded_files,
    spec_conflict_prompt,
    steps_prompt,
)
from pse.toolagent import Policy, render_tool_catalog
from pse.tools import Tool, ToolRegistry, is_test_file

__all__ = ["given_tests", "system_prompts"]


def given_tests(task: Task, task_message: str) -> list[str]:
    """The tests the task gave (its seed, an evaluation instance's files), as the task message lists them."""
    return [
        p for p in seeded_files(task_message)[0] if is_test_file(p) and p not in task.config.expected_outputs
    ]


def system_prompts(
    task: Task,
    settings: Settings,
    policy: Policy,
    registry: ToolRegistry,
    speakers: tuple[str, ...],
    *,
    task_message: str,
    independent_tests: bool,
    on_repository: bool,
    with_mcp: bool,
) -> dict[str, str]:
    """Each speaker's system prompt: the task's prompt for the role, what this run adds to it (planner
    questions, steps, findings, MCP tools, the honest way out of a contradicting test), then its tools.

    Raises:
        ConfigError: PSE_PLANNER_QUESTIONS with a protocol other than the XML one.
    """
    extra: dict[str, str] = {Role.EVALUATOR: independent_tests_prompt()} if independent_tests else {}
    if settings.planner_questions:
        if settings.protocol != "dsml":
            raise ConfigError(
                "PSE_PLANNER_QUESTIONS works with the XML protocol only for now: set PSE_PROTOCOL=dsml, "
                "or PSE_PLANNER_QUESTIONS=false"
            )
        extra[Role.PLANNER] = questions_prompt()
    if task.config.execution == "steps" and settings.crew.plans:
        extra[Role.PLANNER] = "\n\n".join(filter(None, [extra.get(Role.PLANNER), steps_prompt()]))
    if on_repository and settings.protocol == "dsml" and Role.EVALUATOR in speakers:
        extra[Role.EVALUATOR] = "\n\n".join(filter(None, [extra.get(Role.EVALUATOR), findings_prompt()]))
    for role in speakers if with_mcp else ():
        if has_mcp_tools(role, policy, registry):
            extra[role] = "\n\n".join(filter(None, [extra.get(role), mcp_prompt()]))
    # Tests the task gave are protected evidence; a role that finds one contradicting the specification
    # has an honest way out, and is told so (XML protocol): the roles whose grammar lets them end with
    # a conflict (`RoleSpec.finals`).
    told = bool(given_tests(task, task_message)) and settings.protocol == "dsml"
    for role in (r for r in speakers if told and "conflict" in role_spec(r).finals):
        extra[role] = "\n\n".join(filter(None, [extra.get(role), spec_conflict_prompt()]))
    # A role that writes files as file blocks (PSE_WRITE_FORMAT) is told how, where its tools are told.
    fenced = {
        role
        for role in speakers
        if settings.model_spec(role).write_format == "fenced"
        and policy.grant(role, Tool.WRITE_FILE) is not None
    }
    return {
        role: task.system_prompt(role, settings.protocol)
        + (f"\n{extra[role]}\n" if role in extra else "")
        + (f"\n{files_prompt()}\n" if role in fenced else "")
        + "\n## Your tools\n"
        + render_tool_catalog(role, policy, registry, settings.protocol, files=role in fenced)
        for role in speakers
    }
