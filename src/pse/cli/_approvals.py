"""Approving held tool calls from the terminal: the live view's inline question, and `pse approve`.

The inline question runs on a thread of its own (the run's event loop must keep its clock: the
approval timeout, the run deadline, a decision file from elsewhere), and hands the answer to the desk
on the loop's thread. Whatever decides first wins; a late answer at the prompt changes nothing.
"""

from __future__ import annotations

import asyncio
import getpass
import threading
from collections.abc import Callable

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from pse._control import strip_control
from pse.engine import ApprovalDecision, ApprovalDesk
from pse.events import ApprovalEvent, ApprovalRecord
from pse.tools import Tool

__all__ = ["TerminalApprovals", "held_panel"]

_QUESTION = "approve? [y]es / [n]o, deny / [a]ll such calls for this run: "
_ANSWERS = {"y": "call", "yes": "call", "n": "deny", "no": "deny", "a": "run", "all": "run"}


def held_panel(record: ApprovalRecord) -> Panel:
    """A held call as a person reads it: who asks for what, the rule that fired, the preview."""
    head = Text.assemble(
        (strip_control(f"{record.requester} → {record.tool}"), "bold"),
        (strip_control(f"  {record.id}  {record.rule}\n"), "dim"),
        strip_control(f"held because {record.fired}\n"),
    )
    language = {str(Tool.WRITE_FILE): "diff", str(Tool.BASH): "sh"}.get(record.tool, "json")
    preview = Syntax(strip_control(record.preview), language, word_wrap=True, theme="ansi_dark")
    return Panel(Group(head, preview), title="approval needed", border_style="yellow")


class TerminalApprovals:
    """Asks the person at an interactive terminal about every call held in this process.

    Args:
        console: where the question is printed.
        pause: called before the question (the live view stops redrawing) and `resume` after it.
        read: reads one answer line (default `input`; tests pass their own).
    """

    def __init__(
        self,
        console: Console,
        pause: Callable[[], None] = lambda: None,
        resume: Callable[[], None] = lambda: None,
        read: Callable[[str], str] = input,
    ) -> None:
        self.console = console
        self.desk: ApprovalDesk | None = None
        self._pause, self._resume, self._read = pause, resume, read

    def on_event(self, event: ApprovalEvent) -> None:
        """A call was held (ask about it) or decided (nothing to do)."""
        if event.approval.decision is not None or self.desk is None:
            return
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=self._ask, args=(loop, self.desk, event.approval), name="pse-approval", daemon=True
        ).start()

    def _ask(self, loop: asyncio.AbstractEventLoop, desk: ApprovalDesk, record: ApprovalRecord) -> None:
        self._pause()
        try:
            self.console.print(held_panel(record))
            choice = ""
            while choice not in _ANSWERS:
                choice = self._read(_QUESTION).strip().lower()
            scope = _ANSWERS[choice]
            reason = self._read("reason (the role reads it): ").strip() if scope == "deny" else ""
        except (EOFError, OSError):
            return  # no answer from here: the run waits for `pse approve` or the timeout
        finally:
            self._resume()
        decision = ApprovalDecision(
            id=record.id,
            decision="denied" if scope == "deny" else "approved",
            by=getpass.getuser(),
            via="terminal",
            reason=reason,
            scope="run" if scope == "run" else "call",
        )
        loop.call_soon_threadsafe(desk.answer, decision)
