"""`pse trace show RUN_ID`: one run's story.

It takes what `pse trace list` prints, the start of an id, or `last`, and tells the run's story: the causal
line (`pse._causal`), the plan's criteria with the Evaluator's verdict on each per cycle, then every
cycle's findings, gates and tool calls. Everything read from a trace is escaped and stripped of
control sequences before it is printed (a tool could have written the file).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from pse._causal import causal_line, cycle_link, first_sentence, reviewer_of
from pse._control import strip_control
from pse._describe import describe_call, describe_evidence, flat
from pse._run_files import MAX_TRACE_BYTES, read_beneath
from pse.cli._common import RunsDir, command_settings, out, resolve_run_id, shown
from pse.cli._live import CALL_STYLE, outcome_style, token_summary
from pse.cli._trace_list import waiting
from pse.events import PlanRecord
from pse.history import run_dir_of
from pse.trace import CycleRecord, Trace, load_trace

__all__ = ["trace_show"]


def _plans(trace: Trace) -> list[tuple[PlanRecord | None, list[CycleRecord]]]:
    """The plans in force and the cycles that worked to each (a re-plan starts a new group)."""
    groups: list[tuple[PlanRecord | None, list[CycleRecord]]] = []
    current: PlanRecord | None = None
    for cycle in trace.cycles:
        plan = cycle.plan or current or trace.plan
        if not groups or plan != groups[-1][0]:
            groups.append((plan, []))
        groups[-1][1].append(cycle)
        current = plan
    return groups or [(trace.plan, [])]


def _mark(cycle: CycleRecord, criterion: str) -> str:
    judged = {c.id: c.met for c in cycle.verdict.criteria} if cycle.verdict else {}
    if criterion not in judged:
        return "[dim]·[/]"
    return "[green]✓[/]" if judged[criterion] else "[red]✗[/]"


def _print_plan(plan: PlanRecord, cycles: list[CycleRecord]) -> None:
    where = f"cycle {cycles[0].index}" if len(cycles) == 1 else f"cycles {cycles[0].index}–{cycles[-1].index}"
    out.print(f"\n[bold]plan[/] [dim]({where})[/]: {shown(flat(plan.goal))}", highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption="✓ met · ✗ not met · · not judged")
    table.add_column("criterion", no_wrap=True)
    table.add_column("text", ratio=1)
    for cycle in cycles:
        table.add_column(f"c{cycle.index}", justify="center", no_wrap=True)
    for criterion in plan.criteria:
        marks = [_mark(c, criterion.id) for c in cycles]
        table.add_row(shown(criterion.id), shown(flat(criterion.text)), *marks)
    out.print(table)


def _print_cycle(cycle: CycleRecord, reviewer: str) -> None:
    if cycle.verdict is not None:
        said = f"{reviewer} {cycle.verdict.status} ({cycle.verdict.reason_code})"
    elif cycle.blocked is not None:
        said = f"{cycle.blocked.role} blocked ({cycle.blocked.reason_code}): {cycle.blocked.detail}"
    elif cycle.stopped or cycle.review_error:
        said = first_sentence(cycle.stopped or cycle.review_error or "")
    else:
        said = "no verdict"
    head = Text.assemble((f"\ncycle {cycle.index} {cycle.kind}: ", "bold"), flat(said))
    gates = cycle_link(cycle.model_dump(mode="json")).gates  # the badge names what overruled the verdict
    if gates:
        names = ", ".join(f"`{flat(g)}`" for g in gates)
        head.append(f" → gate{'s' if len(gates) > 1 else ''} {names} failed", "red")
        if not cycle.gate.enforced:
            head.append(" (not enforced)", "red")
    if cycle.result:
        head.append(f" → {flat(cycle.result)}", outcome_style({"PASS": "PASSED"}.get(cycle.result, "")))
    out.print(head)
    for crit in cycle.verdict.criteria if cycle.verdict else []:
        mark = "[green]✓[/]" if crit.met else "[red]✗[/]"
        out.print(f"  {mark} {shown(crit.id)}: {shown(flat(crit.finding))}", highlight=False)
    for finding in cycle.verdict.findings if cycle.verdict else []:
        style = {"high": "red", "medium": "yellow"}.get(finding.severity, "dim")
        out.print(f"  [{style}]finding[/] {shown(flat(finding.describe()))}", highlight=False)
    if cycle.verdict is not None:  # without a review, failed gates only echo why the cycle stopped
        for gate in cycle.gate.results:
            mark = "[green]✓[/]" if gate.passed else "[red]✗[/]"
            out.print(f"  gate {mark} {shown(gate.name)}: {shown(flat(gate.detail))}", highlight=False)
        for failure in [] if cycle.gate.results else cycle.gate.failures:
            out.print(f"  gate [red]✗[/] {shown(flat(failure))}", highlight=False)
        if not cycle.gate.enforced:
            out.print("  [dim]gates recorded, not enforced (PSE_HARD_GATES=false or the single team)[/]")
    for said in describe_evidence(cycle.tool_calls):
        out.print(Text("  " + said, "dim" if said.startswith("  ") else ""))
    for drift in cycle.drifts:
        out.print(
            f"  [yellow]drift[/] {shown(drift.role)} turn {drift.turn}, message {drift.message} "
            f"({shown(drift.speaker)}): tool output differs from the recording",
            highlight=False,
        )
    for call in cycle.tool_calls:
        text, kind = describe_call(call)
        line = Text(f"  {flat(call.requester)} ↳ ")
        line.append(flat(text), CALL_STYLE[kind])
        out.print(line)


def trace_show(
    run_id: Annotated[str, typer.Argument(help="A run id, the start of one, or `last` (the newest run).")],
    runs_dir: RunsDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw trace JSON.")] = False,
) -> None:
    """Show one run: why it ended so, the criteria and their verdicts, gates, tool calls and tokens."""
    settings = command_settings(runs_dir=runs_dir)
    run_id = resolve_run_id(run_id, settings)
    path = run_dir_of(settings.runs_dir, run_id)
    if as_json:
        # The file holds whatever a tool wrote there. Valid JSON has no raw C0 controls, and dropping
        # C1 ones from its strings keeps it valid, so the output stays JSON for jq.
        raw = read_beneath(settings.runs_dir, [run_id, "trace.json"], max_bytes=MAX_TRACE_BYTES)
        print(strip_control(raw.decode("utf-8")))
        return
    trace = load_trace(path, beneath=settings.runs_dir)
    ended = trace.outcome or waiting(trace.state)
    out.print(
        f"[bold]{shown(trace.task)}[/] {shown(trace.run_id)}: "
        f"[{outcome_style(trace.outcome)}]{shown(ended)}[/] — {shown(trace.outcome_reason)}",
        highlight=False,
    )
    out.print(f"[bold]why:[/] {shown(causal_line(trace))}", highlight=False)
    if trace.repository is not None:
        repo = trace.repository
        said = f"{repo.path} at {repo.base} ({repo.base_commit[:12]}) → {repo.branch}"
        out.print(f"[bold]repository:[/] {shown(said)}", highlight=False)
        if repo.note:
            out.print(f"  {shown(repo.note)}", highlight=False)
    for plan, cycles in _plans(trace):
        if plan is not None and cycles:
            _print_plan(plan, cycles)
    for cycle in trace.cycles:
        _print_cycle(cycle, reviewer_of(trace))
    out.print()
    out.print(token_summary(trace))
