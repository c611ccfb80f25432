"""A declared check's command: the names `[verification] commands` gives its entries, and what any
check's command (these and `[checks]`) may hold."""

from __future__ import annotations

import re

__all__ = ["command_checks", "command_problem"]


def command_checks(commands: list[str]) -> dict[str, str]:
    """`[verification] commands` as the declared checks they are: `command1`, `command2`... in order."""
    return {f"command{number}": command for number, command in enumerate(commands, start=1)}


def command_problem(name: str, command: str) -> str | None:
    """What is wrong with a check's command, or None: it is empty, or has a placeholder PSE does not fill."""
    if not command.strip():
        return f"check {name!r} has an empty command"
    unknown = set(re.findall(r"\{([^{}]*)\}", command)) - {"python", "task_dir"}
    if unknown:
        return (
            f"check {name!r} uses unknown placeholder(s) {sorted(unknown)}; only {{python}} and {{task_dir}} "
            "are filled in"
        )
    return None
