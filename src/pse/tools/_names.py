"""The names of the tools: the one place they are spelled (prompts, cassettes and policies use them)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["BUILTIN_CHECKS", "Tool", "check_tool"]


class Tool(StrEnum):
    """A tool a role may request. A `StrEnum`: a member equals its name as a string."""

    READ_FILE = "read_file"
    LIST_FILES = "list_files"
    WRITE_FILE = "write_file"
    BASH = "bash"
    RUN_PYTEST = "run_pytest"
    RUN_RUFF = "run_ruff"
    RUN_CHECK = "run_check"
    SEARCH_KNOWLEDGE = "search_knowledge"
    """Registered by the knowledge base when the task has a `knowledge/` folder."""


BUILTIN_CHECKS: dict[str, Tool] = {"pytest": Tool.RUN_PYTEST, "ruff": Tool.RUN_RUFF}
"""Required-check names served by a built-in tool; any other name is a check the task declares."""


def check_tool(check: str) -> Tool:
    """The tool the Evaluator runs a required check with: run_pytest, run_ruff, or run_check(name)."""
    return BUILTIN_CHECKS.get(check, Tool.RUN_CHECK)
