"""The command tree as data: each command's name, one-line summary and where it lives, and `pse --help`
printed from it alone.

Nothing here imports typer, click or rich: `pse --help` is answered from this table (`root_help`) in the
time `pse --version` takes, in the layout click gives the group (`pse.cli._app.LazyGroup`), which
`tests/test_cli_startup.py` holds it to.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass

__all__ = ["COMMANDS", "MEANT", "ROOT_HELP", "VERSION_HELP", "Command", "root_help"]

ROOT_HELP = "PSE: Planner / Specialist / Evaluator runs where done means verified."
VERSION_HELP = "Print PSE's version and exit."


@dataclass(frozen=True)
class Command:
    """One command of the tree: its name, its one-line summary for `--help`, and where it lives
    (`module:attribute`, a command function or a Typer app), or, for a group, its commands and the
    one that runs when the first argument names none of them (`pse eval SUITE` is `pse eval run SUITE`)."""

    name: str
    summary: str
    target: str = ""
    commands: tuple[Command, ...] = ()
    default: str = ""
    usage: str = ""
    """What a group's usage line shows after its name (click's default: `COMMAND [ARGS]...`)."""


MEANT: dict[str, str] = {
    "tasks": "list",
    "ls": "list",
    "runs": "trace list",
    "history": "trace list",
    "show": "trace show",
    "prune": "clean",
    "dashboard": "serve",
}
"""Words people type for a command that has another name: `pse tasks` means `pse list` (click's own
closest name, by spelling, was `stats`)."""

COMMANDS: tuple[Command, ...] = (
    # In the order people meet them: tasks, runs, people's answers, history, then the tools around them.
    Command("list", "List the tasks you can run.", "pse.cli._tasks:list_tasks"),
    Command(
        "new",
        "Scaffold a valid task (prompts, config, registry entry, a small cassette) in your tasks directory.",
        "pse.cli._tasks:new_cmd",
    ),
    Command(
        "validate",
        "Check every task (or one) and report every problem with its file and fix. Exit 2 on any problem.",
        "pse.cli._tasks:validate_cmd",
    ),
    Command(
        "run",
        "Run a task through plan → execute → evaluate cycles until it passes or stops.",
        "pse.cli._run:run_cmd",
    ),
    Command(
        "resume",
        "Continue an interrupted (killed or cancelled) run with its next cycle and the same counters.",
        "pse.cli._run:resume_cmd",
    ),
    Command(
        "answer",
        "Answer an ESCALATED run (take it on with a note, grants, more cycles, a re-plan; accept; close), "
        "or a run whose Planner asked questions (--text).",
        "pse.cli._run:answer_cmd",
    ),
    Command(
        "approve",
        "Approve (or --deny) a tool call a run holds for a person; the run goes on from the held call.",
        "pse.cli._run:approve_cmd",
    ),
    Command(
        "summarize",
        "Run a task's rules over its data: zero model calls. Prints the summary as Markdown and writes "
        "rules_summary.json and .md.",
        "pse.cli._tasks:summarize_cmd",
    ),
    Command(
        "stats",
        "Aggregate over all traces: outcomes, first-cycle pass rate, cycles to pass, denied calls, cost.",
        "pse.cli._stats:stats_cmd",
    ),
    Command(
        "clean",
        "Delete runs older than PSE_TRACE_RETENTION_DAYS, the runs named, or all (--all), with their "
        "worktrees and branches (--repo).",
        "pse.cli._clean:clean_cmd",
    ),
    Command(
        "serve",
        "Serve the web dashboard: live runs, history, trace explorer and metrics.",
        "pse.cli._serve:serve_cmd",
    ),
    Command(
        "doctor",
        "Check each role's model: reachable, speed, context, grammar and native tools, valid tool call and "
        "verdict. Exit 0 all usable, 1 something unusable, 2 configuration error.",
        "pse.cli._doctor:doctor_cmd",
    ),
    Command(
        "eval",
        "Evaluate arms on a suite: `pse eval SUITE` runs it (short for `pse eval run SUITE`), `pse eval "
        "validate SUITE` checks it.",
        commands=(
            Command(
                "run",
                "Run a suite's instances by each arm, judge every run by its hidden check, and compare the "
                "arms.",
                "pse.cli._eval:eval_cmd",
            ),
            Command(
                "validate",
                "Report every problem of a suite folder at once, each with its file, line and fix. Exit 2 on "
                "any problem.",
                "pse.cli._eval:validate_cmd",
            ),
        ),
        default="run",
        usage="SUITE | COMMAND [ARGS]...",
    ),
    Command(
        "batch",
        "Run TASK once per row of an inputs file. Run the same command again to resume: rows that are done "
        "are skipped, interrupted runs go on from their last cycle.",
        "pse.cli._batch:batch_cmd",
    ),
    Command(
        "trace",
        "Read run traces.",
        commands=(
            Command(
                "list", "List runs, newest first, with their whole run ids.", "pse.cli._trace_list:trace_list"
            ),
            Command(
                "show",
                "Show one run: why it ended so, the criteria and their verdicts, gates, tool calls and "
                "tokens.",
                "pse.cli._trace:trace_show",
            ),
            Command(
                "export",
                "Export a run's spans (OpenTelemetry, GenAI conventions): the same spans PSE_OTEL sends "
                "live.",
                "pse.cli._export:export_cmd",
            ),
        ),
    ),
    Command(
        "kb", "Build and search a task's knowledge base (tasks/<task>/knowledge/).", "pse.cli._kb:kb_app"
    ),
    Command(
        "store", "The run store (SQLite in the runs folder, or PSE_STORE_URL).", "pse.cli._store:store_app"
    ),
)
"""Every command of `pse`. A summary is the first paragraph of the command's own help (its docstring,
or its app's help), which `tests/test_cli_startup.py` checks, so `pse --help` reads as before."""


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.TextWrapper(width, replace_whitespace=False).wrap(" ".join(text.split()))


def _definitions(rows: list[tuple[str, str]], width: int) -> list[str]:
    """Click's definition list (`HelpFormatter.write_dl`): names in a column, text wrapped beside them."""
    first = min(max(len(name) for name, _ in rows), 30) + 2
    lines = []
    for name, text in rows:
        wrapped = _wrapped(text, max(width - first - 2, 10))
        if len(name) <= first - 2:
            lines.append(f"  {name}{' ' * (first - len(name))}{wrapped[0]}")
        else:
            lines += [f"  {name}", f"{' ' * (first + 2)}{wrapped[0]}"]
        lines += [f"{' ' * (first + 2)}{line}" for line in wrapped[1:]]
    return lines


def root_help(columns: int | None = None) -> str:
    """`pse --help`, as click lays out the command group: usage, the help text, options, commands."""
    width = max(min(columns or shutil.get_terminal_size().columns, 80) - 2, 50)
    lines = ["Usage: pse [OPTIONS] COMMAND [ARGS]...", ""]
    lines += [f"  {line}" for line in _wrapped(ROOT_HELP, width - 2)]
    lines += ["", "Options:"]
    lines += _definitions([("--version", VERSION_HELP), ("--help", "Show this message and exit.")], width)
    lines += ["", "Commands:"]
    lines += _definitions([(c.name, c.summary) for c in COMMANDS], width)
    return "\n".join(lines) + "\n"
