"""The live view of a run in the terminal, and the final per-role table. Consumes engine events only.

One line per event: who, and what it did ("Specialist ↳ wrote quicksort.py (433 B)", "Evaluator ↳
pytest: 5 passed, 2 failed", "Engine cycle 1: Evaluator PARTIAL → gate `check:pytest` failed →
PARTIAL"), never the protocol's raw XML (`pse._describe`), each line cut to the terminal's width.
Everything shown was written by a model or a tool (or read from a trace a tool could have written),
so it passes through `strip_control` and goes into `Text`, never into markup: a model cannot clear
the screen, move the cursor or colour a fake "every hard gate passed". `pse trace` does the same.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pse._causal import causal_line, cycle_link
from pse._control import strip_control
from pse._describe import CallKind, describe_call, describe_message, flat
from pse.cli._common import outcome_style
from pse.events import (
    ApprovalEvent,
    CycleStarted,
    DriftEvent,
    Event,
    FormatRepairEvent,
    MessageEvent,
    OutcomeEvent,
    RetrievalEvent,
    StepEvent,
    ToolCallEvent,
    TransitionEvent,
    VerdictEvent,
)
from pse.roles import SINGLE_AGENT, TOOL_AGENT, Role
from pse.trace import Trace

__all__ = [
    "CALL_STYLE",
    "LiveView",
    "cost_line",
    "outcome_style",
    "strip_control",
    "token_summary",
    "token_table",
]

_ROLE_STYLE = {
    Role.PLANNER: "cyan",
    Role.SPECIALIST: "blue",
    Role.EVALUATOR: "magenta",
    SINGLE_AGENT: "green",
    TOOL_AGENT: "grey58",
}


CALL_STYLE: dict[CallKind, str] = {"ok": "default", "finding": "yellow", "failed": "red", "denied": "red"}
"""How a tool call's line is coloured: a check's findings are yellow, a broken or refused call red."""
_VERDICT_STYLE = {"PASS": "green", "PARTIAL": "yellow"}


def _line(label: str, label_style: str, body: str = "", body_style: str = "default") -> Text:
    """One line of the view, cut with … at the width it is shown in (never wrapped)."""
    line = Text(f"{label:>10} ", label_style, no_wrap=True, overflow="ellipsis")
    line.append(body, body_style)
    return line


class LiveView:
    """A compact, continuously refreshed view: what is happening now ("cycle 1 · Specialist writing
    quicksort.py · 3 tool calls", as the dashboard's live line says it), state, tokens, and a line per
    event.

    On a terminal it redraws one panel in place. When the output is not a terminal (a CI log, a pipe),
    a redrawn panel would leave only its last frame, so every line is printed once as it happens, and
    nothing more at the end (the token table and the outcome line follow).
    """

    def __init__(self, console: Console, task: str, run_id: str = "") -> None:
        self.console = console
        self.task, self.run_id = task, run_id
        self.cycle, self.cycle_kind, self.state, self.speaker = 0, "", "START", ""
        self.tokens, self.cost, self.currency = 0, 0.0, "USD"
        self.outcome: str | None = None
        self.lines: deque[Text] = deque(maxlen=14)
        self._cycle: dict[str, Any] = {}
        self._single = False
        """What the view knows of the current cycle, in the trace's shape (`pse._causal` reads it)."""
        self.on_held: Callable[[ApprovalEvent], None] | None = None
        """Asks a person about a held call (the terminal's inline question), if someone can answer here."""
        self._live = (
            Live(self._render(), console=console, refresh_per_second=8, transient=False)
            if console.is_terminal
            else None
        )

    def __enter__(self) -> LiveView:
        if self._live is not None:
            self._live.__enter__()
        else:
            head = _line("run", "bold", f"{flat(self.task)} {flat(self.run_id)}".strip())
            self.console.print(head, no_wrap=True, overflow="ellipsis")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)

    def pause(self) -> None:
        """Stop redrawing (a question is asked below the panel)."""
        if self._live is not None:
            self._live.stop()

    def resume(self) -> None:
        """Redraw again after a question."""
        if self._live is not None:
            self._live.start()

    def _add(self, text: Text) -> None:
        self.lines.append(text)
        if self._live is None:
            self.console.print(text, no_wrap=True, overflow="ellipsis")

    def on_event(self, event: Event) -> None:
        """Update the view with one engine event."""
        self.run_id = self.run_id or event.run_id
        match event:
            case CycleStarted():
                self._cycle_started(event)
            case MessageEvent():
                self._message(event)
            case ToolCallEvent():
                self._tool_call(event)
            case RetrievalEvent():
                self._retrieval(event)
            case DriftEvent():
                self._drift(event)
            case VerdictEvent():
                self._verdict(event)
            case FormatRepairEvent():
                self._repair(event)
            case ApprovalEvent():
                self._approval(event)
            case StepEvent():
                self._step(event)
            case TransitionEvent():
                self.state = event.transition.to
            case OutcomeEvent():
                self.state = self.outcome = event.outcome
                self.cost, self.currency = event.cost, event.currency
        if self._live is not None:
            self._live.update(self._render())

    @property
    def now(self) -> str:
        """What the run is doing now: an open cycle's actor, act and tool calls; after its review, the
        cycle's link and what follows ("cycle 1: Evaluator PARTIAL → running"); the outcome at the end."""
        if not self._cycle:
            return "starting"
        team = {"team": "single"} if self._single else {}  # its own review: "Agent PASS", not "Evaluator"
        data = {"state": self.state, "outcome": self.outcome, "cycles": [self._cycle], "settings": team}
        return causal_line(data, live=True)

    def _cycle_started(self, event: CycleStarted) -> None:
        self.cycle, self.cycle_kind = event.cycle, event.cycle_kind
        self._cycle = {
            "index": event.cycle,
            "first_speaker": event.first_speaker,
            "messages": [],
            "tool_calls": [],
        }
        speaker = flat(event.first_speaker)
        self._add(Text(f"── cycle {event.cycle} ({event.cycle_kind}) starts with {speaker}", "bold"))

    def _message(self, event: MessageEvent) -> None:
        m = event.message
        self.speaker = flat(m.source)
        self._cycle.setdefault("messages", []).append({"source": m.source, "at": m.at})
        self._single = self._single or m.source == SINGLE_AGENT
        if m.source == TOOL_AGENT:  # its results are shown call by call
            return
        self.tokens += m.prompt_tokens + m.completion_tokens
        said = describe_message(m.source, m.content) + (" (late: not acted on)" if m.late else "")
        self._add(_line(self.speaker, _ROLE_STYLE.get(m.source, "white"), said))

    def _tool_call(self, event: ToolCallEvent) -> None:
        call = event.call
        path = {"path": call.arguments["path"]} if "path" in call.arguments else {}
        act = {"requester": call.requester, "tool": call.tool, "arguments": path, "at": call.at}
        self._cycle.setdefault("tool_calls", []).append(act)
        text, kind = describe_call(call)
        self._add(
            _line(
                flat(call.requester),
                _ROLE_STYLE.get(call.requester, "white"),
                "↳ " + flat(text),
                CALL_STYLE[kind],
            )
        )

    def _retrieval(self, event: RetrievalEvent) -> None:
        top = ", ".join(f"{r['file']}:{r['start_line']}-{r['end_line']}" for r in event.results[:3])
        said = f'"{flat(event.query, 60)}" → {len(event.results)} result(s)' + (f": {top}" if top else "")
        self._add(_line("Knowledge", "green", flat(said)))

    def _drift(self, event: DriftEvent) -> None:
        d = event.drift
        said = (
            f"drift: {d.role} turn {d.turn}, message {d.message} ({d.speaker}): tool output differs "
            f"from the recording ({d.recorded_chars} → {d.chars} chars)"
        )
        self._add(_line("Replay", "yellow", flat(said)))

    def _verdict(self, event: VerdictEvent) -> None:
        cycle: dict[str, Any] = {
            "index": event.cycle,
            "verdict": event.verdict.model_dump() if event.verdict is not None else None,
            "gate": event.gate.model_dump(),
            "stopped": event.stopped,
            "review_error": event.error,
            "result": event.result,  # the engine's decision (pse.engine._decide), shown, never re-derived
            "ended_at": event.at,
        }
        self._cycle.update(cycle)
        reviewer = SINGLE_AGENT if self.speaker == SINGLE_AGENT else Role.EVALUATOR
        style = _VERDICT_STYLE.get(event.result, "red") if event.verdict is not None else "magenta"
        self._add(_line("Engine", style, flat(cycle_link(cycle, reviewer).text())))

    def _repair(self, event: FormatRepairEvent) -> None:
        fix = event.repair
        said = f"asked {fix.role} to repair its turn ({fix.attempt}): {fix.error}"
        self._add(_line("Engine", "yellow", flat(said)))

    def _approval(self, event: ApprovalEvent) -> None:
        a = event.approval
        if a.decision is None:
            asked = f"{a.id}: {a.requester}→{a.tool} held ({a.fired}); pse approve {self.run_id} {a.id}"
            self._add(_line("Approval", "yellow", flat(asked)))
            if self.on_held is not None:
                self.on_held(event)
            return
        said = f"{a.id} {a.decision} by {a.by} ({a.via})" + (f": {a.reason}" if a.reason else "")
        self._add(_line("Approval", "yellow", flat(said), "green" if a.decision == "approved" else "red"))

    def _step(self, event: StepEvent) -> None:
        step = event.attempt
        if not step.result:
            self._add(_line("Step", "cyan", flat(f"{step.step} attempt {step.attempt} started")))
            return
        line = _line("Step", "cyan", flat(f"{step.step} attempt {step.attempt}") + ": ")
        line.append(flat(step.result), _VERDICT_STYLE.get(step.result, "red"))
        line.append(" " + flat(f"({step.result_reason})"))
        self._add(line)

    def _render(self) -> Panel:
        head = Text.assemble(
            (f"{flat(self.task)} ", "bold"),
            (f"{flat(self.run_id)}\n", "dim"),
            "state ",
            (self.state, outcome_style(self.state) if outcome_style(self.state) != "white" else "bold"),
            f"  cycle {self.cycle} {self.cycle_kind}".rstrip(),
            "  tokens ",
            (f"{self.tokens:,}", "bold"),
        )
        now = Text(flat(self.now), "bold", no_wrap=True, overflow="ellipsis")
        return Panel(Group(head, now, Text(""), *self.lines), title="PSE run", border_style="dim")


def cost_line(amount: float, currency: str, unpriced: list[str]) -> str:
    """`cost 0.012300 USD`, or as the dashboard says it when a model has no price: `cost unpriced
    (scripted has no price; set PSE_PRICES)`, `cost 0.012300 USD (unpriced, counted as 0: m)`."""
    if unpriced and not amount:
        verb = "has" if len(unpriced) == 1 else "have"
        return f"cost unpriced ({', '.join(unpriced)} {verb} no price; set PSE_PRICES)"
    counted = f" (unpriced, counted as 0: {', '.join(unpriced)})" if unpriced else ""
    return f"cost {amount:.6f} {currency}{counted}"


def token_summary(trace: Trace) -> RenderableType:
    """The per-role token table, or one line when no model call answered (a down model): no table of
    zeros."""
    if not any(t.calls or t.prompt or t.completion for t in trace.tokens.by_role.values()):
        return Text("no model call answered: no tokens spent, no cost", "dim")
    return token_table(trace)


def token_table(trace: Trace) -> Table:
    """Per-role tokens and the run's cost."""
    table = Table(title="tokens and cost", show_footer=True)
    table.add_column("role", footer="total")
    table.add_column(
        "calls", justify="right", footer=str(sum(t.calls for t in trace.tokens.by_role.values()))
    )
    table.add_column("prompt", justify="right", footer=f"{trace.tokens.prompt:,}")
    table.add_column("completion", justify="right", footer=f"{trace.tokens.completion:,}")
    table.add_column("total", justify="right", footer=f"{trace.tokens.total:,}")
    for role, t in trace.tokens.by_role.items():
        table.add_row(
            Text(strip_control(role)),
            str(t.calls),
            f"{t.prompt:,}",
            f"{t.completion:,}",
            f"{t.prompt + t.completion:,}",
        )
    caption = cost_line(trace.cost.amount, trace.cost.currency, trace.cost.unpriced_models)
    for probe in trace.probes:  # a call PSE made of its own, counted in its role's row
        tokens = probe.prompt_tokens + probe.completion_tokens
        if not tokens:
            continue  # it never reached its server: no call was counted
        caption += (
            f"\n{probe.role}'s calls include PSE's grammar-support probe of {probe.server} ({tokens} tokens; "
            "what it learned is kept for later runs)"
        )
    table.caption = Text(strip_control(caption))
    return table
