"""The live view of a run in the terminal, and the final per-role table. Consumes engine events only.

Everything shown here was written by a model or a tool (or read from a trace a tool could have
written), so it passes through `strip_control` first: a model cannot clear the screen, move the
cursor or colour a fake "every hard gate passed". `pse trace` uses the same function.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pse.engine import Trace
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

__all__ = ["LiveView", "outcome_style", "strip_control", "token_table"]

_CONTROL = re.compile(
    r"""
      \x1b\[ [0-?]* [ -/]* [@-~]            # CSI: cursor moves, erase, colours
    | \x1b\] [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)  # OSC: window title, hyperlinks, clipboard
    | \x1b[PX^_] [^\x1b\x9c]* (?:\x1b\\|\x9c)    # DCS, SOS, PM, APC strings
    | \x1b [ -/]* [0-~]                     # other escapes (ESC c resets the terminal)
    | \x9b [0-?]* [ -/]* [@-~]              # 8-bit CSI
    | \x9d [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)   # 8-bit OSC
    | [\x90\x98\x9e\x9f] [^\x1b\x9c]* (?:\x1b\\|\x9c)  # 8-bit DCS, SOS, PM, APC
    | [\x00-\x08\x0b-\x1f\x7f-\x9f]           # what is left: C0 but tab and newline, DEL, C1, lone ESC
    """,
    re.VERBOSE,
)


def strip_control(text: str) -> str:
    """`text` without terminal control sequences, safe to print: what models and tools wrote.

    Removes CSI, OSC, DCS/SOS/PM/APC sequences (7- and 8-bit), other escape sequences, a lone ESC,
    every C0 control but newline and tab (so also carriage return and backspace, which overwrite
    what was printed), DEL and the C1 controls. An unterminated string sequence loses only its
    introducer; the text after it stays visible.
    """
    return _CONTROL.sub("", text)


_OUTCOME_STYLE = {
    "PASSED": "bold green",
    "ESCALATED": "bold yellow",
    "TIMEOUT": "bold magenta",
    "ERROR": "bold red",
}
_ROLE_STYLE = {
    Role.PLANNER: "cyan",
    Role.SPECIALIST: "blue",
    Role.EVALUATOR: "magenta",
    SINGLE_AGENT: "green",
    TOOL_AGENT: "grey58",
}


def outcome_style(outcome: str | None) -> str:
    """The colour of an outcome."""
    return _OUTCOME_STYLE.get(outcome or "", "white")


def _one_line(text: str, width: int = 96) -> str:
    flat = " ".join(strip_control(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class LiveView:
    """A compact, continuously refreshed view: cycle, state, who speaks, tool decisions, tokens and cost.

    On a terminal it redraws one panel in place. When the output is not a terminal (a CI log, a pipe),
    a redrawn panel would leave only its last frame, so every line is printed as it happens instead,
    and the panel once at the end.
    """

    def __init__(self, console: Console, task: str, run_id: str = "") -> None:
        self.console = console
        self.task, self.run_id = task, run_id
        self.cycle, self.cycle_kind, self.state, self.speaker = 0, "", "START", ""
        self.tokens, self.cost, self.currency = 0, 0.0, "USD"
        self.lines: deque[Text] = deque(maxlen=14)
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
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is None:
            self.console.print(self._render())
            return
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
            self.console.print(text)

    def on_event(self, event: Event) -> None:
        """Update the view with one engine event."""
        self.run_id = self.run_id or event.run_id
        if isinstance(event, CycleStarted):
            self.cycle, self.cycle_kind = event.cycle, event.cycle_kind
            speaker = strip_control(event.first_speaker)
            self._add(Text(f"── cycle {event.cycle} ({event.cycle_kind}) starts with {speaker}", "bold"))
        elif isinstance(event, MessageEvent):
            m = event.message
            self.speaker = strip_control(m.source)
            if m.source != TOOL_AGENT:
                self.tokens += m.prompt_tokens + m.completion_tokens
                line = Text(f"{self.speaker:>10} ", _ROLE_STYLE.get(m.source, "white"))
                line.append(_one_line(m.content), "default")
                self._add(line)
        elif isinstance(event, ToolCallEvent):
            c = event.call
            ok = c.decision == "allowed"
            line = Text(f"{TOOL_AGENT:>10} ", _ROLE_STYLE[TOOL_AGENT])
            line.append(strip_control(f"{c.requester}→{c.tool} "), "bold")
            line.append(strip_control(c.decision), "green" if ok else "red")
            line.append(strip_control(f" {c.status} {c.ms}ms" + ("" if ok else f" ({c.rule})")))
            self._add(line)
        elif isinstance(event, RetrievalEvent):
            top = strip_control(
                ", ".join(f"{r['file']}:{r['start_line']}-{r['end_line']}" for r in event.results[:3])
            )
            line = Text(f"{'Knowledge':>10} ", "green")
            line.append(
                f'"{_one_line(event.query, 60)}" → {len(event.results)} result(s)'
                + (f": {top}" if top else "")
            )
            self._add(line)
        elif isinstance(event, DriftEvent):
            d = event.drift
            line = Text(f"{'Replay':>10} ", "yellow")
            line.append(
                strip_control(
                    f"drift: {d.role} turn {d.turn}, message {d.message} ({d.speaker}): tool output differs "
                    f"from the recording ({d.recorded_chars} → {d.chars} chars)"
                )
            )
            self._add(line)
        elif isinstance(event, VerdictEvent):
            if event.verdict is not None:
                failed = [c.id for c in event.verdict.criteria if not c.met]
                text = f"verdict {event.verdict.status} ({event.verdict.reason_code})"
                text += f"; unmet: {', '.join(failed)}" if failed else ""
                style = "green" if event.verdict.status == "PASS" else "yellow"
            elif event.error is not None:
                text, style = f"review error: {event.error}", "red"
            else:  # no review happened: the cycle was stopped, or a role blocked
                text, style = (
                    f"no review: {event.stopped or 'the cycle ended before the Evaluator spoke'}",
                    "magenta",
                )
            if not event.gate.passed and event.verdict is not None and event.verdict.status == "PASS":
                text += f"; hard gate failed: {'; '.join(event.gate.failures)}"
                style = "red"
            self._add(Text(f"{'Engine':>10} {strip_control(text)}", style))
        elif isinstance(event, FormatRepairEvent):
            fix = event.repair
            line = Text(f"{'Engine':>10} ", "yellow")
            line.append(
                strip_control(f"asked {fix.role} to repair its turn ({fix.attempt}): {_one_line(fix.error)}")
            )
            self._add(line)
        elif isinstance(event, ApprovalEvent):
            a = event.approval
            line = Text(f"{'Approval':>10} ", "yellow")
            if a.decision is None:
                asked = f"{a.id}: {a.requester}→{a.tool} held ({a.fired}); pse approve {self.run_id} {a.id}"
                line.append(_one_line(asked, 140))
            else:
                said = f"{a.id} {a.decision} by {a.by} ({a.via})" + (f": {a.reason}" if a.reason else "")
                line.append(_one_line(said, 140), "green" if a.decision == "approved" else "red")
            self._add(line)
            if a.decision is None and self.on_held is not None:
                self.on_held(event)
        elif isinstance(event, StepEvent):
            step = event.attempt
            line = Text(f"{'Step':>10} ", "cyan")
            if not step.result:
                line.append(strip_control(f"{step.step} attempt {step.attempt} started"))
            else:
                style = {"PASS": "green", "PARTIAL": "yellow"}.get(step.result, "red")
                line.append(strip_control(f"{step.step} attempt {step.attempt}: "))
                line.append(strip_control(step.result), style)
                line.append(" " + _one_line(f"({step.result_reason})", 100))
            self._add(line)
        elif isinstance(event, TransitionEvent):
            self.state = event.transition.to
        elif isinstance(event, OutcomeEvent):
            self.state = event.outcome
            self.cost, self.currency = event.cost, event.currency
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Panel:
        head = Text.assemble(
            (f"{strip_control(self.task)} ", "bold"),
            (f"{strip_control(self.run_id)}\n", "dim"),
            "cycle ",
            (f"{self.cycle} {self.cycle_kind}", "bold"),
            "  state ",
            (self.state, outcome_style(self.state) if self.state in _OUTCOME_STYLE else "bold"),
            "  speaking ",
            (self.speaker or "-", _ROLE_STYLE.get(self.speaker, "white")),
            "  tokens ",
            (f"{self.tokens:,}", "bold"),
        )
        return Panel(Group(head, Text(""), *self.lines), title="PSE run", border_style="dim")


def token_table(trace: Trace) -> Table:
    """Per-role tokens and the run's cost."""
    table = Table(title=f"Tokens and cost: {trace.run_id}", show_footer=True)
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
    unpriced = f" (unpriced: {', '.join(trace.cost.unpriced_models)})" if trace.cost.unpriced_models else ""
    table.caption = Text(strip_control(f"cost {trace.cost.amount:.6f} {trace.cost.currency}{unpriced}"))
    return table
