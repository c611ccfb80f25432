"""The run's opening message, as a task's config and inputs make it, and what a reader takes back from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pse.tasks._config import BUILTIN_CHECKS, TaskConfig

__all__ = ["opening_message", "seeded_files"]

_SEED_LISTING_CAP = 30
_SEEDED = "## Files already in the workspace\n"


def seeded_files(task_message: str) -> tuple[list[str], bool]:
    """The files a run's task message lists as already in the workspace (the task's seed and an
    evaluation instance's files), and whether that is all of them (False: the listing was cut short,
    these are its first entries)."""
    if _SEEDED not in task_message:
        return [], True
    listing = task_message.split(_SEEDED, 1)[1].split("\n\n", 1)[0].splitlines()
    more = [line for line in listing if line.startswith("- … and ")]
    return [line[2:] for line in listing if line.startswith("- ") and line not in more], not more


def opening_message(
    name: str,
    config: TaskConfig,
    inputs: Mapping[str, str],
    listing: Sequence[str],
    rules_summary: str | None = None,
) -> str:
    """The message a run opens with: the goal, the `inputs` (resolved), the workspace files of `listing`
    (at most `_SEED_LISTING_CAP`, then how many more), the expected outputs, the required checks, the
    rules summary. A multi-line input (code, a document) is a fenced block under its name.

    Deterministic and free of absolute paths, run ids and times, so a cassette recorded with request
    digests replays in any later run."""
    parts = [f"# Task: {name}", "## Goal\n" + config.goal.strip()]
    if inputs:
        parts.append("## Inputs\n" + "\n".join(_input_line(k, v) for k, v in sorted(inputs.items())))
    if listing:
        shown = listing[:_SEED_LISTING_CAP]
        more = len(listing) - len(shown)
        lines = [f"- {path}" for path in shown] + ([f"- … and {more} more"] if more else [])
        parts.append(_SEEDED + "\n".join(lines))
    if config.expected_outputs:
        parts.append(
            "## Expected outputs (workspace paths)\n"
            + "\n".join(f"- {path}" for path in config.expected_outputs)
        )
    if config.all_required_checks:
        parts.append(
            "## Required checks (the Evaluator must run each, and its last run must succeed)\n"
            + "\n".join(f"- {_check_call(check)}" for check in config.all_required_checks)
        )
    if rules_summary:
        parts.append("## Rules summary (computed without a model)\n" + rules_summary.strip())
    return "\n\n".join(parts) + "\n"


def _input_line(name: str, value: str) -> str:
    if "\n" not in value:
        return f"- {name}: {value}"
    fence = "```"
    while fence in value:  # a value holding ``` gets a longer fence
        fence += "`"
    return f"- {name}:\n\n{fence}\n{value.rstrip()}\n{fence}\n"


def _check_call(name: str) -> str:
    tool = BUILTIN_CHECKS.get(name)
    return f'{name}: run_check(name="{name}")' if tool is None else f"{name}: {tool}"
