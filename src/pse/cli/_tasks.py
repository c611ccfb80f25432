"""`pse list`, `new`, `validate` and `summarize`: the commands about tasks rather than runs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pse.cli._common import TasksDir, err, out
from pse.cli._common import command_settings as _settings
from pse.cli._run import EXIT_USAGE
from pse.config import Settings
from pse.runner import own_tests, registry_for, user_tasks_dir
from pse.tasks import Problem, Task, TaskRegistry, offline_warnings, run_rules, scaffold_task, validate
from pse.tools import is_test_file

__all__ = ["evidence_rules_of", "list_tasks", "new_cmd", "summarize_cmd", "validate_cmd"]

TaskArg = Annotated[str, typer.Argument(help="A task name (`pse list` shows them).")]


def list_tasks(tasks_dir: TasksDir = None) -> None:
    """List the tasks you can run."""
    registry = registry_for(_settings(tasks_dir=tasks_dir))
    table = Table("task", "description")
    for name in registry.names():
        table.add_row(name, escape(registry.description(name)))
    out.print(table)


def validate_cmd(
    task: Annotated[str | None, typer.Argument(help="The task to check (default: every task).")] = None,
    tasks_dir: TasksDir = None,
) -> None:
    """Check every task (or one) and report every problem with its file and fix. Exit 2 on any problem."""
    settings = _settings(tasks_dir=tasks_dir)
    registry = registry_for(settings)
    problems = validate(registry, task)
    for problem in problems:
        err.print(f"[red]✗[/] {escape(str(problem))}", highlight=False)
    warnings = _offline_warnings(registry, settings, task, problems)
    for warning in warnings:
        err.print(f"[bold yellow]warning:[/] {escape(str(warning))}", highlight=False)
    if problems:
        raise typer.Exit(EXIT_USAGE)
    noted = f" ({len(warnings)} warning{'s' if len(warnings) > 1 else ''} above)" if warnings else ""
    out.print(f"[green]ok[/]: {escape(task or 'all tasks')} valid{noted}")
    if task is not None:
        for line in evidence_rules_of(registry.get(task)):
            out.print(line, highlight=False, markup=False)


def _offline_warnings(
    registry: TaskRegistry, settings: Settings, task: str | None, problems: list[Problem]
) -> list[Problem]:
    """The warnings of every valid task validated: can it run offline, and does its cassette write
    what the task expects (a task with problems has those to fix first). PSE's own tasks are warned of
    only when named: one that needs a model by design (humaneval, run by `pse eval`) is no news to a
    person who validates their tasks."""
    troubled = {Path(p.file).resolve() for p in problems}
    speakers = settings.crew.speakers
    model_configured = all(settings.model_spec(role).provider != "scripted" for role in speakers)
    found: list[Problem] = []
    for name in [task] if task is not None else registry.names():
        location = registry.location(name)
        folder = location.dir.resolve()
        if any(folder == path or folder in path.parents for path in troubled) or (
            task is None and location.builtin
        ):
            continue
        found += offline_warnings(
            registry.get(name), model_configured=model_configured, cassette=settings.cassette
        )
    return found


def evidence_rules_of(task: Task) -> list[str]:
    """What every check of a run of `task` may see (its manifest, before the plan adds its outputs)."""
    outputs = list(task.config.expected_outputs)
    python = [p for p in outputs if p.endswith(".py") and not is_test_file(p)]
    config = sorted(task.check_config_files)
    verification = task.config.verification
    lines = [
        "evidence: every check runs over a sealed snapshot of these files only (docs/security.md):",
        "  outputs (the task's; the plan may add more): " + (", ".join(outputs) or "none"),
        "  inputs (the task's own files; no role may change them): "
        + (", ".join(task.seed_listing()) or "none"),
        "  check configuration: "
        + (
            ", ".join(config)
            if config
            else "none declared (pytest -c /dev/null --noconftest; ruff --isolated)"
        ),
        "  evidence globs ([verification] evidence): " + (", ".join(verification.evidence) or "none"),
    ]
    if own_tests(task):
        lines.append("  the Evaluator's own tests (@evaluation/), in a pytest session of their own")
    if python:
        lines.append("  a pytest run must execute, from its own path: " + ", ".join(python))
    lines.append("  every other file a role writes is left out of the checks, and the Evaluator is told")
    return lines


def new_cmd(
    name: Annotated[str, typer.Argument(help="The new task's name: lowercase letters, digits, hyphens.")],
    tasks_dir: TasksDir = None,
) -> None:
    """Scaffold a valid task (prompts, config, registry entry, a small cassette) in your tasks directory."""
    folder = scaffold_task(name, user_tasks_dir(_settings(tasks_dir=tasks_dir)))
    out.print(f"created {folder}; check it with `pse validate {name}`, run it with `pse run {name}`")


def summarize_cmd(
    task: TaskArg,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Where the summary goes (default: a folder of the system's temporary directory)."
        ),
    ] = None,
    tasks_dir: TasksDir = None,
) -> None:
    """Run a task's rules over its data: zero model calls. Prints the summary as Markdown and writes
    rules_summary.json and .md."""
    settings = _settings(tasks_dir=tasks_dir)
    t = registry_for(settings).get(task)
    # not into the folder it is run from (a checkout): the temporary directory unless --out says where
    target = out_dir or Path(tempfile.gettempdir()) / "pse-summaries" / t.name
    summary = run_rules(t, target)
    print(summary.to_markdown(), end="")  # as it is: a terminal's width must not wrap a Markdown table
    err.print(f"[dim]written to {escape(str(target.resolve()))}/rules_summary.json and rules_summary.md[/]")
