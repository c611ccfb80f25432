"""What each role is told about its tools: the "your tools" text of its system prompt, and its functions.

Both come from one list, the role's grants that are registered in the run, so a role is offered exactly
the tools the ToolAgent would run for it (a granted tool that is not registered, e.g. `search_knowledge`
without a knowledge base, would fail: it is not offered).
"""

from __future__ import annotations

from collections.abc import Iterator

from pse.config import ProtocolMode
from pse.protocol import FunctionSpec, ToolSignature, tool_function
from pse.toolagent._policy import Policy
from pse.tools import Tool, ToolRegistry, ToolSpec, builtin_tools

__all__ = ["render_tool_catalog", "tool_functions", "tool_signatures"]

_HEADS: dict[ProtocolMode, str] = {
    "dsml": "write a <tool_calls> block; the ToolAgent answers with <tool_results>",
    "native": "call them as functions; the ToolAgent answers each call with its result",
}


_FILE_BLOCK = ", written as a file block (see Writing files)"


def _granted(role: str, policy: Policy, registry: ToolRegistry | None) -> Iterator[tuple[ToolSpec, str]]:
    """Each registered tool `role` is granted, with its grant and the note the role reads about it."""
    registry = registry if registry is not None else builtin_tools()
    for tool, mode in policy.tools_for(role):
        spec = registry.get(tool)
        grant = policy.grant(role, tool)
        if spec is None or grant is None:
            continue  # granted but not registered in this run (e.g. no knowledge base): calling it would fail
        where = (
            " (only in your evaluation area: paths start with @evaluation/)"
            if grant.areas == ("evaluation",)
            else ""
        )
        yield spec, f"{where} [{mode}, {grant.budget}/cycle]"


def render_tool_catalog(
    role: str,
    policy: Policy,
    registry: ToolRegistry | None = None,
    protocol: ProtocolMode = "dsml",
    *,
    files: bool = False,
) -> str:
    """List the tools `role` may call (registered ones only), with parameters, mode and budget.

    Example line: `- write_file(path, content) — Create or replace a file ... [read-write, 30/cycle]`.
    Pass the run's registry when it holds more than the built-ins (e.g. search_knowledge); `protocol`
    says how the role calls them; with `files`, the role writes files as file blocks, and `write_file`
    says so.
    """
    lines = [
        f"- {spec.signature.usage()}{_FILE_BLOCK if files and spec.name == Tool.WRITE_FILE else ''} — "
        f"{spec.description}{note}"
        for spec, note in _granted(role, policy, registry)
    ]
    if not lines:
        return f"{role} has no tools in this task."
    head = f"Tools {role} may request ({_HEADS[protocol]}; paths are relative to the workspace):"
    return "\n".join([head, *lines])


def tool_functions(role: str, policy: Policy, registry: ToolRegistry | None = None) -> list[FunctionSpec]:
    """The tools `role` may call, as the functions of the native protocol (same tools, same notes)."""
    return [
        tool_function(spec.signature, spec.description + note)
        for spec, note in _granted(role, policy, registry)
    ]


def tool_signatures(role: str, policy: Policy, registry: ToolRegistry | None = None) -> list[ToolSignature]:
    """The tools `role` may call, as the signatures its constrained-decoding grammar allows."""
    return [spec.signature for spec, _ in _granted(role, policy, registry)]
