"""`pse run`, `resume`, `answer` and `approve`: the commands that execute a run, with its live view.

Exit codes: 0 PASSED, 1 the run ended without a pass (or waits for a person), 2 usage or configuration
error, 3 ERROR.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape

from pse._causal import causal_line, first_cause
from pse.cli._approvals import TerminalApprovals, held_panel
from pse.cli._common import RunsDir, TasksDir, err, out, resolve_run_id
from pse.cli._common import command_settings as _settings
from pse.cli._common import shown as _shown
from pse.cli._live import LiveView, outcome_style, token_summary
from pse.config import Settings
from pse.exceptions import UserError
from pse.runner import (
    PreparedRun,
    answer_run,
    approve_call,
    pending_approvals,
    prepare_resume,
    prepare_run,
    registry_for,
    run_to_end,
)
from pse.trace import load_trace

__all__ = [
    "EXIT_ERROR",
    "EXIT_NO_PASS",
    "EXIT_PASSED",
    "EXIT_USAGE",
    "answer_cmd",
    "approve_cmd",
    "fail",
    "resume_cmd",
    "run_cmd",
]

EXIT_PASSED, EXIT_NO_PASS, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print `error: MESSAGE` (markup allowed: escape what a person or a model wrote) and exit `code`."""
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def _parse_inputs(pairs: list[str], task: str, settings: Settings) -> dict[str, str]:
    """`--input KEY=VALUE`s as a dict. One that is not KEY=VALUE is named with what the task takes."""
    inputs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            declared = registry_for(settings).get(task).config.inputs
            if not declared:
                raise UserError(f"task {task!r} takes no inputs; run it without --input {pair}")
            raise UserError(
                f"--input {pair} is not KEY=VALUE; task {task!r} takes "
                + ", ".join(f"{name} ({spec.description})" for name, spec in declared.items())
            )
        inputs[key.strip()] = value
    return inputs


def _exit_code(outcome: str | None) -> int:
    return {"PASSED": EXIT_PASSED, "ERROR": EXIT_ERROR}.get(outcome or "ERROR", EXIT_NO_PASS)


def _live_view(task: str, as_json: bool) -> LiveView | None:
    """The terminal's live view of a run (none for --json): it is the run's event consumer from the start."""
    return None if as_json else LiveView(out, task)


def _execute(prepared: PreparedRun, view: LiveView | None) -> int:
    """Run with a live view (or quietly for --json), Ctrl-C cancelling cleanly; print the result."""
    sandbox = prepared.engine.trace.sandbox
    if sandbox is not None and sandbox.warning:
        err.print(f"[bold yellow]{escape(sandbox.warning)}[/]")
    repository = prepared.engine.trace.repository
    if repository is not None and repository.warning:
        err.print(f"[bold yellow]warning:[/] {escape(repository.warning)}", highlight=False)
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
    out.print(token_summary(trace))
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
    if summary.outcome == "ERROR" and first_cause(trace) is not None:  # the error hides what set it off
        out.print(f"[bold]why:[/] {_shown(causal_line(trace))}", highlight=False)
    out.print(f"trace:  {summary.trace}")
    if summary.report:
        out.print(f"report: {summary.report}")
    if summary.escalation:
        out.print(f"escalation: {summary.escalation}")
    if trace.repository is not None:
        if summary.commit or not trace.repository.released:  # a branch still in the repository
            out.print(f"branch: {_shown(trace.repository.branch)}", highlight=False)
        if summary.commit:
            out.print(f"commit: {summary.commit}", highlight=False)
        if summary.patch:
            out.print(f"patch:  {summary.patch}", highlight=False)
        out.print(f"[dim]{_shown(trace.repository.note)}[/]", highlight=False)
    return _exit_code(summary.outcome)


RunId = Annotated[str, typer.Argument(help="A run id, the start of one, or `last` (the newest run).")]


def run_cmd(
    task: Annotated[str, typer.Argument(help="The task to run (`pse list` shows them).")],
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
    repo: Annotated[
        Path | None,
        typer.Option("--repo", help="Work on this git repository: a worktree on the branch pse/<run_id>."),
    ] = None,
    base: Annotated[
        str | None,
        typer.Option("--base", help="The ref the worktree starts from (default HEAD); with --repo."),
    ] = None,
) -> None:
    """Run a task through plan → execute → evaluate cycles until it passes or stops."""
    if cassette is not None and not cassette.is_file():
        raise fail(f"cassette {cassette} does not exist; pass an existing cassette file")
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
        task,
        settings,
        inputs=_parse_inputs(input or [], task, settings),
        on_event=view.on_event if view else None,
        repo=repo,
        base=base,
    )
    raise typer.Exit(_execute(prepared, view))


def resume_cmd(
    run_id: RunId,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary at the end.")] = False,
) -> None:
    """Continue an interrupted (killed or cancelled) run with its next cycle and the same counters."""
    settings = _settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    run_id = resolve_run_id(run_id, settings)
    view = _live_view("", as_json)
    prepared = prepare_resume(run_id, settings, on_event=view.on_event if view else None)
    if view is not None:
        view.task = prepared.task.name
    raise typer.Exit(_execute(prepared, view))


def answer_cmd(
    run_id: RunId,
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
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary at the end.")] = False,
) -> None:
    """Answer an ESCALATED run (take it on with a note, grants, more cycles, a re-plan; accept; close),
    or a run whose Planner asked questions (--text)."""
    if accept and reject:
        raise fail("pass --accept or --reject, not both")
    settings = _settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    run_id = resolve_run_id(run_id, settings)
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


def approve_cmd(
    run_id: RunId,
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
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object at the end.")] = False,
) -> None:
    """Approve (or --deny) a tool call a run holds for a person; the run goes on from the held call."""
    settings = _settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    run_id = resolve_run_id(run_id, settings)
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
