"""`pse`: run tasks, inspect runs, manage tasks.

Exit codes: 0 PASSED, 1 the run ended without a pass, 2 usage or configuration error, 3 ERROR.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.table import Table

from pse.cli._approvals import TerminalApprovals, held_panel
from pse.cli._batch import batch_cmd
from pse.cli._common import RunsDir, TasksDir, err, out
from pse.cli._common import command_settings as _settings
from pse.cli._common import shown as _shown
from pse.cli._doctor import doctor_cmd
from pse.cli._eval import eval_cmd
from pse.cli._kb import kb_app
from pse.cli._live import LiveView
from pse.cli._store import store_app
from pse.cli._trace import trace_app
from pse.engine import load_trace, prune_runs
from pse.exceptions import InternalError, PSEError, PSEWarning, UserError
from pse.history import compute_stats, list_runs
from pse.runner import (
    PreparedRun,
    answer_run,
    approve_call,
    pending_approvals,
    prepare_resume,
    prepare_run,
    registry_for,
    run_to_end,
    user_tasks_dir,
)
from pse.store import open_store
from pse.tasks import run_rules, scaffold_task, validate

__all__ = ["app", "main"]

app = typer.Typer(
    name="pse",
    help="PSE: Planner / Specialist / Evaluator runs where done means verified.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(trace_app, name="trace")
app.add_typer(kb_app, name="kb")
app.add_typer(store_app, name="store")
app.command("doctor")(doctor_cmd)
app.command("eval")(eval_cmd)
app.command("batch")(batch_cmd)

EXIT_PASSED, EXIT_NO_PASS, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def _parse_inputs(pairs: list[str]) -> dict[str, str]:
    inputs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--input {pair!r} is not KEY=VALUE")
        inputs[key.strip()] = value
    return inputs


def _exit_code(outcome: str | None) -> int:
    return {"PASSED": EXIT_PASSED, "ERROR": EXIT_ERROR}.get(outcome or "ERROR", EXIT_NO_PASS)


def _live_view(task: str, as_json: bool) -> LiveView | None:
    """The terminal's live view of a run (none for --json): it is the run's event consumer from the start."""
    return None if as_json else LiveView(out, task)


def _execute(prepared: PreparedRun, view: LiveView | None) -> int:
    """Run with a live view (or quietly for --json), Ctrl-C cancelling cleanly; print the result."""
    from pse.cli._live import outcome_style, token_table

    sandbox = prepared.engine.trace.sandbox
    if sandbox is not None and sandbox.warning:
        err.print(f"[bold yellow]{escape(sandbox.warning)}[/]")
    if prepared.defaulted_scripted:
        err.print(
            "[yellow]No model configured: using the scripted provider, replaying a cassette "
            "(set PSE_PROVIDER / PSE_API_KEY for a real model).[/]"
        )

    if view is not None and sys.stdin.isatty():  # a person is here: held calls are asked about inline
        asker = TerminalApprovals(out, pause=view.pause, resume=view.resume)
        asker.desk = prepared.engine.setup.approvals
        view.on_held = asker.on_event

    async def go() -> Any:
        loop = asyncio.get_running_loop()
        # Ctrl-C cancels the run, but a run waiting for an approval stops where it is and keeps waiting.
        loop.add_signal_handler(signal.SIGINT, prepared.engine.interrupt)
        try:
            return await run_to_end(prepared)
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    if view is None:
        summary = asyncio.run(go())
        print(summary.model_dump_json())
        return EXIT_NO_PASS if summary.outcome is None else _exit_code(summary.outcome)
    view.run_id = prepared.run_id
    with view:
        summary = asyncio.run(go())
    trace = load_trace(Path(summary.trace))
    out.print()
    out.print(token_table(trace))
    if summary.state == "AWAITING_ANSWER":
        asked = trace.cycles[-1].clarification if trace.cycles else None
        for q in asked.questions if asked is not None else []:
            out.print(f"  {_shown(q.id)}: {_shown(q.text)}")
        out.print(
            f"[yellow]waiting for a person[/]: the Planner asked; answer with "
            f"`pse answer {summary.run_id} --text '…'` (the run resumes from here)"
        )
        out.print(f"trace:  {summary.trace}")
        return EXIT_NO_PASS
    if summary.state == "AWAITING_APPROVAL":
        for held in pending_approvals(trace, Path(summary.trace).parent):
            out.print(held_panel(held))
            out.print(
                f"[yellow]waiting for a person[/]: approve with `pse approve {summary.run_id} {held.id}`, "
                f"or deny with `pse approve {summary.run_id} {held.id} --deny --reason '…'` "
                "(the run resumes from here, no model call repeated)"
            )
        out.print(f"trace:  {summary.trace}")
        return EXIT_NO_PASS
    style = outcome_style(summary.outcome)
    out.print(
        f"[{style}]{summary.outcome}[/] after {summary.cycles} cycle(s): {_shown(summary.outcome_reason)}"
    )
    out.print(f"trace:  {summary.trace}")
    if summary.report:
        out.print(f"report: {summary.report}")
    if summary.escalation:
        out.print(f"escalation: {summary.escalation}")
    return _exit_code(summary.outcome)


@app.command("list")
def list_tasks(tasks_dir: TasksDir = None) -> None:
    """List the tasks you can run."""
    registry = registry_for(_settings(tasks_dir=tasks_dir))
    table = Table("task", "description")
    for name in registry.names():
        table.add_row(name, registry.description(name))
    out.print(table)


@app.command("validate")
def validate_cmd(task: Annotated[str | None, typer.Argument()] = None, tasks_dir: TasksDir = None) -> None:
    """Check every task (or one) and report every problem with its file and fix. Exit 2 on any problem."""
    registry = registry_for(_settings(tasks_dir=tasks_dir))
    problems = validate(registry, task)
    if not problems:
        out.print(f"[green]ok[/]: {task or 'all tasks'} valid")
        return
    for problem in problems:
        err.print(f"[red]✗[/] {problem}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


@app.command("new")
def new_cmd(name: str, tasks_dir: TasksDir = None) -> None:
    """Scaffold a valid task (prompts, config, registry entry, a small cassette) in your tasks directory."""
    folder = scaffold_task(name, user_tasks_dir(_settings(tasks_dir=tasks_dir)))
    out.print(f"created {folder}; check it with `pse validate {name}`, run it with `pse run {name}`")


@app.command("run")
def run_cmd(
    task: str,
    input: Annotated[list[str] | None, typer.Option("--input", help="KEY=VALUE, repeatable.")] = None,
    provider: Annotated[str | None, typer.Option(help="openai, ollama or scripted.")] = None,
    model: Annotated[str | None, typer.Option(help="Model name for every role.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="API base URL.")] = None,
    cassette: Annotated[Path | None, typer.Option(help="Cassette for the scripted provider.")] = None,
    record: Annotated[Path | None, typer.Option(help="Record the model exchange into this cassette.")] = None,
    replay_tools: Annotated[
        bool, typer.Option("--replay-tools", help="Answer tool calls from the cassette's recorded tool runs.")
    ] = False,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary at the end.")] = False,
) -> None:
    """Run a task through plan → execute → evaluate cycles until it passes or stops."""
    if cassette is not None and not cassette.is_file():
        raise _fail(f"cassette {cassette} does not exist; pass an existing cassette file")
    settings = _settings(
        provider=provider,
        model=model,
        base_url=base_url,
        cassette=cassette.resolve() if cassette else None,
        record=record,
        replay_tools=True if replay_tools else None,  # unset: PSE_REPLAY_TOOLS decides
        runs_dir=runs_dir,
        tasks_dir=tasks_dir,
    )
    view = _live_view(task, as_json)
    prepared = prepare_run(
        task, settings, inputs=_parse_inputs(input or []), on_event=view.on_event if view else None
    )
    raise typer.Exit(_execute(prepared, view))


@app.command("resume")
def resume_cmd(
    run_id: str,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Continue an interrupted (killed or cancelled) run with its next cycle and the same counters."""
    view = _live_view("", as_json)
    prepared = prepare_resume(
        run_id, _settings(runs_dir=runs_dir, tasks_dir=tasks_dir), on_event=view.on_event if view else None
    )
    if view is not None:
        view.task = prepared.task.name
    raise typer.Exit(_execute(prepared, view))


@app.command("answer")
def answer_cmd(
    run_id: str,
    note: Annotated[str | None, typer.Option("--note", help="Told to the next cycle (step_buffer).")] = None,
    text: Annotated[
        str | None, typer.Option("--text", help="The answers to a waiting Planner's questions.")
    ] = None,
    grant: Annotated[
        list[str] | None, typer.Option("--grant", help="[ROLE.]TOOL[:MODE] for this run only, repeatable.")
    ] = None,
    retries: Annotated[int, typer.Option("--retries", help="Cycles the run gets (this one included).")] = 1,
    replan: Annotated[bool, typer.Option("--replan", help="Start at the Planner.")] = False,
    accept: Annotated[
        bool, typer.Option("--accept", help="Accept the last artifacts: ACCEPTED_BY_HUMAN.")
    ] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Close the run as it stands.")] = False,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Answer an ESCALATED run (take it on with a note, grants, more cycles, a re-plan; accept; close),
    or a run whose Planner asked questions (--text)."""
    if accept and reject:
        raise _fail("pass --accept or --reject, not both")
    settings = _settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    decision: Literal["resume", "accept", "reject"] = "accept" if accept else "reject" if reject else "resume"
    trace = answer_run(
        run_id,
        settings,
        decision=decision,
        note=note,
        text=text,
        grants=grant or [],
        retries=retries,
        replan=replan,
    )
    if decision != "resume":
        if as_json:
            print(json.dumps({"run_id": trace.run_id, "outcome": trace.outcome, "answer": decision}))
        else:
            out.print(f"run {trace.run_id}: {trace.outcome} ({decision}ed by {_shown(trace.answers[-1].by)})")
        raise typer.Exit(EXIT_PASSED)  # the answer is recorded
    view = _live_view(trace.task, as_json)
    prepared = prepare_resume(run_id, settings, on_event=view.on_event if view else None)
    raise typer.Exit(_execute(prepared, view))


@app.command("approve")
def approve_cmd(
    run_id: str,
    call_id: Annotated[str | None, typer.Argument(help="The held call (A2.1); default the only one.")] = None,
    deny: Annotated[bool, typer.Option("--deny", help="Deny the call; the role reads --reason.")] = False,
    reason: Annotated[
        str, typer.Option("--reason", help="Why (recorded; a denial's goes to the role).")
    ] = "",
    all_such: Annotated[
        bool, typer.Option("--all", help="Approve every later call of the same role, tool and rule too.")
    ] = False,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Approve (or --deny) a tool call a run holds for a person; the run goes on from the held call."""
    settings = _settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    answer = approve_call(
        run_id, settings, call_id, approve=not deny, reason=reason, scope="run" if all_such else "call"
    )
    said = f"{answer.approval.id} {answer.decision.decision} by {answer.decision.by}"
    if answer.live_elsewhere:  # the process that holds the run picks the decision up
        if as_json:
            print(
                json.dumps(
                    {
                        "run_id": run_id,
                        "approval": answer.approval.id,
                        "decision": answer.decision.decision,
                        "resumed": False,
                    }
                )
            )
        else:
            out.print(f"run {_shown(run_id)}: {_shown(said)}; the process that executes it goes on")
        raise typer.Exit(EXIT_PASSED)
    if not as_json:
        out.print(f"run {_shown(run_id)}: {_shown(said)}; resuming it here")
    view = _live_view(answer.trace.task, as_json)
    prepared = prepare_resume(run_id, settings, on_event=view.on_event if view else None)
    raise typer.Exit(_execute(prepared, view))


@app.command("summarize")
def summarize_cmd(
    task: str,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Where the summary goes.")] = None,
    tasks_dir: TasksDir = None,
) -> None:
    """Run a task's rules over its data: zero model calls. Writes rules_summary.json and .md."""
    t = registry_for(_settings(tasks_dir=tasks_dir)).get(task)
    target = out_dir or Path("summaries") / t.name
    summary = run_rules(t, target)
    out.print(summary.to_markdown(), highlight=False)
    out.print(f"[dim]written to {target.resolve()}/rules_summary.json and rules_summary.md[/]")


@app.command("stats")
def stats_cmd(runs_dir: RunsDir = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Aggregate over all traces: outcomes, first-cycle pass rate, cycles to pass, denied calls, cost."""
    settings = _settings(runs_dir=runs_dir)
    stats = compute_stats(settings.runs_dir, settings)
    if as_json:
        print(stats.model_dump_json())
        return
    table = Table("metric", "value")
    for key, value in stats.model_dump().items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    out.print(table)


@app.command("clean")
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


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option(help="Bind address; non-loopback needs PSE_WEB_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
) -> None:
    """Serve the web dashboard: live runs, history, trace explorer and metrics."""
    from pse.web import serve

    serve(_settings(runs_dir=runs_dir, tasks_dir=tasks_dir), host=host, port=port)


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
        code = app(standalone_mode=False)
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
