"""`pse`: run tasks, inspect runs, manage tasks.

Exit codes: 0 PASSED, 1 the run ended without a pass, 2 usage or configuration error, 3 ERROR.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pse.cli._batch import batch_cmd
from pse.cli._common import RunsDir, TasksDir, err, out, suggesting_tasks
from pse.cli._common import command_settings as _settings
from pse.cli._doctor import doctor_cmd
from pse.cli._eval import eval_cmd
from pse.cli._export import export_cmd
from pse.cli._help import tidy_help, version_option
from pse.cli._kb import kb_app
from pse.cli._run import EXIT_ERROR, EXIT_USAGE, answer_cmd, approve_cmd, resume_cmd, run_cmd
from pse.cli._serve import serve_cmd
from pse.cli._stats import stats_cmd
from pse.cli._store import store_app
from pse.cli._trace import trace_app
from pse.engine import prune_runs
from pse.exceptions import InternalError, PSEError, PSEWarning, UserError
from pse.history import list_runs
from pse.runner import registry_for, user_tasks_dir
from pse.store import open_store
from pse.tasks import Task, run_rules, scaffold_task, validate
from pse.tools import is_test_file

__all__ = ["app", "main"]

app = typer.Typer(
    name="pse",
    help="PSE: Planner / Specialist / Evaluator runs where done means verified.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(version: Annotated[bool, version_option()] = False) -> None:
    """PSE: Planner / Specialist / Evaluator runs where done means verified."""


TaskArg = Annotated[str, typer.Argument(help="A task name (`pse list` shows them).")]


def list_tasks(tasks_dir: TasksDir = None) -> None:
    """List the tasks you can run."""
    registry = registry_for(_settings(tasks_dir=tasks_dir))
    table = Table("task", "description")
    for name in registry.names():
        table.add_row(name, registry.description(name))
    out.print(table)


def validate_cmd(
    task: Annotated[str | None, typer.Argument(help="The task to check (default: every task).")] = None,
    tasks_dir: TasksDir = None,
) -> None:
    """Check every task (or one) and report every problem with its file and fix. Exit 2 on any problem."""
    settings = _settings(tasks_dir=tasks_dir)
    with suggesting_tasks(task or "", settings):
        problems = validate(registry_for(settings), task)
    if not problems:
        out.print(f"[green]ok[/]: {task or 'all tasks'} valid")
        if task is not None:
            for line in evidence_rules_of(registry_for(settings).get(task)):
                out.print(line, highlight=False, markup=False)
        return
    for problem in problems:
        err.print(f"[red]✗[/] {problem}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


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
    if verification.independent_tests:
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
    out_dir: Annotated[Path | None, typer.Option("--out", help="Where the summary goes.")] = None,
    tasks_dir: TasksDir = None,
) -> None:
    """Run a task's rules over its data: zero model calls. Writes rules_summary.json and .md."""
    settings = _settings(tasks_dir=tasks_dir)
    with suggesting_tasks(task, settings):
        t = registry_for(settings).get(task)
    target = out_dir or Path("summaries") / t.name
    summary = run_rules(t, target)
    out.print(summary.to_markdown(), highlight=False)
    out.print(f"[dim]written to {target.resolve()}/rules_summary.json and rules_summary.md[/]")


def clean_cmd(
    runs_dir: RunsDir = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Delete every run, not only expired ones.")] = False,
) -> None:
    """Delete runs older than PSE_TRACE_RETENTION_DAYS (or all with --all)."""
    settings = _settings(runs_dir=runs_dir)
    if all_runs:
        removed = [e.run_id for e in list_runs(settings.runs_dir, settings)]
        for run_id in removed:
            shutil.rmtree(settings.runs_dir / run_id)
    else:
        removed = prune_runs(settings.runs_dir, settings.trace_retention_days)
    open_store(settings).forget(removed)
    out.print(f"removed {len(removed)} run(s)")


# In the order people meet them: tasks, runs, people's answers, history, then the tools around them.
for _name, _command in (
    ("list", list_tasks),
    ("new", new_cmd),
    ("validate", validate_cmd),
    ("run", run_cmd),
    ("resume", resume_cmd),
    ("answer", answer_cmd),
    ("approve", approve_cmd),
    ("summarize", summarize_cmd),
    ("stats", stats_cmd),
    ("clean", clean_cmd),
    ("serve", serve_cmd),
    ("doctor", doctor_cmd),
    ("eval", eval_cmd),
    ("batch", batch_cmd),
):
    app.command(_name)(_command)
trace_app.command("export")(export_cmd)
app.add_typer(trace_app, name="trace")
app.add_typer(kb_app, name="kb")
app.add_typer(store_app, name="store")


def _warning_printer(fallback: Callable[..., None]) -> Callable[..., None]:
    """A `warnings.showwarning` that prints PSE's warnings as one `warning:` line each."""

    def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, PSEWarning):
            err.print(f"[bold yellow]warning:[/] {escape(str(message))}", highlight=False)
        else:
            fallback(message, category, *args, **kwargs)

    return show


def main() -> None:
    """Console entry point: PSE's warnings as `warning:` lines (each once), errors as exit codes."""
    with warnings.catch_warnings():
        warnings.simplefilter("default", PSEWarning)  # once per message, whatever the caller's filters
        warnings.showwarning = _warning_printer(warnings.showwarning)
        _main()


def _main() -> None:
    try:
        # Outside standalone mode click returns a command's exit code instead of raising it.
        code = tidy_help(typer.main.get_command(app)).main(prog_name="pse", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(EXIT_USAGE)
    except InternalError as exc:  # a bug in PSE: the traceback is what a report needs
        err.print_exception()
        err.print(
            f"[bold red]internal error:[/] {exc}\nThis is a bug in PSE, not in your task or settings; "
            "please report it with the traceback above and the run's trace.json",
            highlight=False,
        )
        sys.exit(EXIT_ERROR)
    except PSEError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(EXIT_ERROR)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: missing argument, bad option value
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(EXIT_USAGE)
