"""What the replay tests share."""

from __future__ import annotations

from typing import Any


def usage_of(tokens: Any) -> dict[str, tuple[int, int, int]]:
    """The usage per role a provider (or a recording) reported: prompt, completion and calls. Not PSE's
    own prefix measurement of the prompts sent, which follows the tool output (and so any drift)."""
    return {role: (t.prompt, t.completion, t.calls) for role, t in tokens.by_role.items()}


def turn_usage_of(trace: Any) -> dict[str, tuple[int, int, int]]:
    """`usage_of` a live run's trace without its grammar-support probes (a replay sends none)."""
    usage = usage_of(trace.tokens)
    for probe in trace.probes:
        prompt, completion, calls = usage[probe.role]
        usage[probe.role] = (prompt - probe.prompt_tokens, completion - probe.completion_tokens, calls - 1)
    return usage
