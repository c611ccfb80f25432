"""`pse`: run tasks, inspect runs, manage tasks.

Exit codes: 0 PASSED, 1 the run ended without a pass, 2 usage or configuration error, 3 ERROR.

The command tree is a table of names, one-line summaries and where each command lives
(`pse.cli._tree`, which also answers `pse --help` without this module). A command's
module (and what it imports: the runner, AutoGen, the run store) is imported only when that command
runs or shows its own help, so `pse --version` and `pse --help` start in a fraction of the time a run
needs. `tests/test_cli_startup.py` holds the summaries to the commands' own docstrings.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from pse._notice import set_notice_sink
from pse.cli._common import err
from pse.cli._help import tidy_help, version_option
from pse.cli._tree import COMMANDS, MEANT, ROOT_HELP, Command
from pse.exceptions import InternalError, PSEError, PSEWarning, UserError

__all__ = ["COMMANDS", "LazyGroup", "app", "main"]

EXIT_USAGE, EXIT_ERROR = 2, 3  # as pse.cli._run defines them (not imported: it imports the runner)


def _placeholder(command: Command) -> typer.core.TyperCommand:
    """What `--help` lists for a command that is not loaded: its name and summary, nothing imported."""
    return typer.core.TyperCommand(name=command.name, help=command.summary, callback=None)


def _loaded(command: Command) -> Any:
    """The click command of `command`: its module imported, a function made a command, an app a group."""
    if command.commands:
        return LazyGroup(
            name=command.name,
            help=command.summary,
            no_args_is_help=True,
            table=command.commands,
            default=command.default,
            subcommand_metavar=command.usage or None,
        )
    module, _, attribute = command.target.partition(":")
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        return typer.main.get_command(target)
    single = typer.Typer(add_completion=False)
    single.command(command.name)(target)
    return typer.main.get_command(single)


class LazyGroup(TyperGroup):
    """A group whose commands are imported when one of them is asked for (to run, or for its own help);
    `--help` of the group lists their names and summaries without importing anything. With a
    `default`, arguments that do not start with a command's name are that command's."""

    table: Sequence[Command] = COMMANDS

    def __init__(
        self, *args: Any, table: Sequence[Command] | None = None, default: str = "", **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.default = default
        if table is not None:
            self.table = table
        self._entries = {command.name: command for command in self.table}
        for command in self.table:
            self.commands[command.name] = _placeholder(command)
        self._real: dict[str, Any] = {}

    def load(self, name: str) -> Any:
        """The real command `name` (imported now if it was not yet), with people's names in its help."""
        if name not in self._real:
            command = _loaded(self._entries[name])
            command.name = name
            self._real[name] = self.commands[name] = tidy_help(command)
        return self._real[name]

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if self.default and args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default, *args]  # `pse eval SUITE --limit 2`, `pse eval --limit 2 SUITE`
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """A group's help (a list of its commands) in click's plain layout: typer's boxed one imports
        rich's Markdown and markdown-it, about 0.15 s, most of `pse --help`. A command's own help keeps
        the boxes."""
        super(TyperGroup, self).format_help(ctx, formatter)  # click's, past typer's override

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with its whole summary, wrapped (click would cut it at about 45 characters)."""
        rows = [(name, self._entries[name].summary) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        word = args[0] if args else ""
        if self.table is COMMANDS and word in MEANT and word not in self.commands:
            meant = MEANT[word]
            summary = next((c.summary for c in COMMANDS if c.name == meant.split()[0]), "")
            ctx.fail(f"No such command {word!r}. Did you mean '{meant}'? (pse {meant.split()[0]}: {summary})")
        name, command, rest = super().resolve_command(ctx, args)
        return name, (self.load(name) if name in self._entries else command), rest


app = typer.Typer(
    name="pse",
    cls=LazyGroup,
    help=ROOT_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(version: Annotated[bool, version_option()] = False) -> None:
    """PSE: Planner / Specialist / Evaluator runs where done means verified."""


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
    set_notice_sink(lambda text: err.print(f"[dim]{escape(text)}[/]", highlight=False))
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
    except UserError as exc:  # messages are plain text: `[tasks.NAME]` is no markup
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(EXIT_USAGE)
    except InternalError as exc:  # a bug in PSE: the traceback is what a report needs
        err.print_exception()
        err.print(
            f"[bold red]internal error:[/] {escape(str(exc))}\nThis is a bug in PSE, not in your task or "
            "settings; please report it with the traceback above and the run's trace.json",
            highlight=False,
        )
        sys.exit(EXIT_ERROR)
    except PSEError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(EXIT_ERROR)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: missing argument, bad option value
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(EXIT_USAGE)
