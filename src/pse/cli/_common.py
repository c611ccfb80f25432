"""What the `pse` commands share: the consoles, the common options, settings and safe printing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from pse.cli._live import strip_control
from pse.config import Settings, load_settings

__all__ = ["RunsDir", "TasksDir", "command_settings", "configure_logging", "err", "out", "shown"]

out = Console()
err = Console(stderr=True)

TasksDir = Annotated[Path | None, typer.Option("--tasks-dir", help="Extra tasks directory (PSE_TASKS_DIR).")]
RunsDir = Annotated[Path | None, typer.Option("--runs-dir", help="Where run folders go (PSE_RUNS_DIR).")]


def command_settings(**overrides: Any) -> Settings:
    """The settings of one command: the environment and `.env`, with its options (None: not given)."""
    settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    configure_logging(settings.log_level)
    return settings


def configure_logging(level: str) -> None:
    """Our logs at PSE_LOG_LEVEL. AutoGen logs every agent exception with a traceback even though the
    engine records it as the run's outcome; those stay quiet unless PSE_LOG_LEVEL=DEBUG."""
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", force=True)
    for name in ("autogen_core", "autogen_agentchat", "autogen_ext"):
        logging.getLogger(name).setLevel(logging.DEBUG if level == "DEBUG" else logging.CRITICAL + 1)


def shown(text: object) -> str:
    """Text a model, a tool or a trace file wrote, ready for rich markup: no control sequences, no markup."""
    return escape(strip_control(str(text)))
