"""What the `pse` commands share: the consoles, the common options, settings, run ids as people type
them and safe printing.

Every command imports this module, so it imports nothing heavy: the settings model is imported when a
command asks for its settings, never when `pse --help` is printed.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from pse._control import strip_control
from pse._run_id import check_run_id, is_run_id
from pse.exceptions import UserError

if TYPE_CHECKING:
    from pse.config import Settings

T = TypeVar("T")

__all__ = [
    "LAST_RUN",
    "RunsDir",
    "TasksDir",
    "command_settings",
    "configure_logging",
    "err",
    "option_names",
    "out",
    "outcome_style",
    "resolve_run_id",
    "run_interruptible",
    "shown",
]


class _Console(Console):
    """A console that, when its reader goes away (`pse run … | head`), goes quiet and lets the command
    finish: rich's default exits the process, which in the middle of a run ended the run as ERROR."""

    def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:
        """Rich's print; a line of text sent to a program (no terminal, no COLUMNS) is never wrapped: a
        `trace:` path stays on its line, a sentence stays whole for grep (tables keep their width)."""
        if soft_wrap is None and self.piped and all(isinstance(o, str) for o in objects):
            soft_wrap = True
        super().print(*objects, soft_wrap=soft_wrap, **options)

    @property
    def piped(self) -> bool:
        """Output goes to a program, and no COLUMNS asks for a width."""
        return not self.is_terminal and "COLUMNS" not in os.environ

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (sys.stderr if self.stderr else sys.stdout).fileno())
        os.close(devnull)


out = _Console()
err = _Console(stderr=True)

TasksDir = Annotated[Path | None, typer.Option("--tasks-dir", help="Extra tasks directory (PSE_TASKS_DIR).")]
RunsDir = Annotated[Path | None, typer.Option("--runs-dir", help="Where run folders go (PSE_RUNS_DIR).")]
LAST_RUN = "last"
"""What a person types for the newest run, wherever a command takes a run id."""
_SHOWN_MATCHES = 5


def command_settings(**overrides: Any) -> Settings:
    """The settings of one command: the environment and `.env`, with its options (None: not given).

    A bad option value is reported as the option's (`--provider: …`), not as a variable's.
    """
    from pse.config._load import load_settings_given

    given = {k: v for k, v in overrides.items() if v is not None}
    settings = load_settings_given(option_names(given), **given)
    configure_logging(settings.log_level)
    return settings


def option_names(settings: Iterable[str]) -> dict[str, str]:
    """Each setting by the option that sets it on the command line: `runs_dir` → `--runs-dir`."""
    return {name: "--" + name.replace("_", "-") for name in settings}


def configure_logging(level: str) -> None:
    """Our logs at PSE_LOG_LEVEL. AutoGen logs every agent exception with a traceback even though the
    engine records it as the run's outcome; those stay quiet unless PSE_LOG_LEVEL=DEBUG."""
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", force=True)
    for name in ("autogen_core", "autogen_agentchat", "autogen_ext"):
        logging.getLogger(name).setLevel(logging.DEBUG if level == "DEBUG" else logging.CRITICAL + 1)


_OUTCOME_STYLE = {
    "PASSED": "bold green",
    "ESCALATED": "bold yellow",
    "TIMEOUT": "bold magenta",
    "ERROR": "bold red",
}


def outcome_style(outcome: str | None) -> str:
    """The colour of an outcome."""
    return _OUTCOME_STYLE.get(outcome or "", "white")


def shown(text: object) -> str:
    """Text a model, a tool or a trace file wrote, ready for rich markup: no control sequences, no markup."""
    return escape(strip_control(str(text)))


def _is_run_folder(runs_dir: Path, name: str) -> bool:
    try:  # a real folder holding a regular trace.json, as the run history reads them (no symlinks)
        folder = os.lstat(runs_dir / name)
        return stat.S_ISDIR(folder.st_mode) and stat.S_ISREG(os.lstat(runs_dir / name / "trace.json").st_mode)
    except OSError:
        return False


def resolve_run_id(text: str, settings: Settings) -> str:
    """A run id as a person types it: the whole id, `last` (the newest run), or a unique start of one.

    Returns the whole id; the text unchanged when no run starts with it (the command's own lookup
    then says there is no such run).

    Raises:
        UserError: the text is no run id at all, `last` in an empty runs directory, or the start of
            several run ids (the message lists some).
    """
    runs_dir = settings.runs_dir
    if text == LAST_RUN and not _is_run_folder(runs_dir, text):
        from pse.history import list_runs

        newest = list_runs(runs_dir, settings, limit=1)
        if not newest:
            raise UserError(f"no runs in {runs_dir} yet, so no `last` one; `pse run TASK` makes one")
        return newest[0].run_id
    check_run_id(text)
    if _is_run_folder(runs_dir, text):
        return text
    try:
        names = [e.name for e in os.scandir(runs_dir) if e.name.startswith(text) and is_run_id(e.name)]
    except OSError:
        return text
    matches = sorted(name for name in names if _is_run_folder(runs_dir, name))
    if len(matches) > 1:
        listed = ", ".join(matches[:_SHOWN_MATCHES]) + (", …" if len(matches) > _SHOWN_MATCHES else "")
        raise UserError(
            f"{text!r} is the start of {len(matches)} run ids ({listed}); type more of the id, or `last` "
            "for the newest run"
        )
    return matches[0] if matches else text


def run_interruptible(main: Coroutine[Any, Any, T], cancel: Callable[[], object]) -> T:
    """`asyncio.run(main)` with Ctrl-C calling `cancel` (runs end at their cycle boundary and resume
    next time) instead of killing the loop: what `pse batch` and `pse eval` do."""

    import asyncio
    import signal

    async def go() -> T:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, cancel)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    return asyncio.run(go())
