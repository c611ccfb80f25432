"""Help text that reads like help, and `pse --version`.

Typer shows every parameter's Python type: `--json <bool>`, `--input <list[str]>`, `pse run {task}`.
`tidy_help` walks the command tree once before it runs and names values as people do: a flag shows
no value, `--input TEXT`, `--runs-dir DIR`, `--port N`, `pse run TASK [OPTIONS]`. It reads Typer's
parameter objects by duck typing, so a Typer without those attributes keeps its own help. Docstring
paragraphs are reflowed, so a command's summary is never cut where its source line ended.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, get_args, get_origin

import typer

from pse.cli._common import out
from pse.cli._tree import VERSION_HELP
from pse.cli._version import package_version

__all__ = ["package_version", "tidy_help", "version_option"]


def _show_version(value: bool) -> None:
    if value:
        out.print(f"pse {package_version()}", highlight=False)
        raise typer.Exit(0)


def version_option() -> Any:
    """The `--version` option of the `pse` group: prints `pse X.Y.Z` and exits 0."""
    return typer.Option("--version", is_eager=True, callback=_show_version, help=VERSION_HELP)


def _value_name(param: Any) -> str:
    """How a value is named in help: DIR, PATH, N, NUMBER, a choice list, else TEXT."""
    desc = getattr(param, "type_descriptor", None)
    if getattr(desc, "is_choice", False) and getattr(desc, "choices", None):
        return "[" + "|".join(str(c) for c in desc.choices) + "]"  # type: ignore[union-attr]
    annotation = getattr(desc, "annotation", str)
    if get_origin(annotation) is list:
        annotation = (get_args(annotation) or (str,))[0]
    if getattr(desc, "is_path", False) or annotation is Path:
        return "DIR" if str(getattr(param, "name", "")).endswith("dir") else "PATH"
    return {int: "N", float: "NUMBER"}.get(annotation, "TEXT")


def _tidy(param: Any) -> None:
    kind = getattr(param, "param_type_name", "")
    if kind == "option" and hasattr(param, "display_type_rich"):
        name = (
            None if getattr(param, "is_flag", False) or getattr(param, "count", False) else _value_name(param)
        )
        param.display_type_rich = lambda ctx: name  # None: a flag shows no value
    elif kind == "argument" and hasattr(param, "display_type_rich"):
        shown = str(param.metavar or param.name).upper()
        param.metavar = shown
        param.display_type_rich = lambda ctx: None
        usage = shown if param.required else f"[{shown}]"
        param._usage_display_name = lambda: usage + ("..." if param.nargs != 1 else "")


def _tidied_help_option(make: Any) -> Any:
    def help_option(ctx: Any) -> Any:  # click makes `--help` anew for each context
        option = make(ctx)
        if option is not None:
            _tidy(option)
        return option

    return help_option


def _reflowed(text: str) -> str:
    """Docstring paragraphs as paragraphs: their source line breaks go (the terminal wraps them)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def tidy_help(command: Any) -> Any:
    """`command` and every subcommand with people's names for values in their help (see the module)."""
    if isinstance(getattr(command, "help", None), str):
        command.help = _reflowed(command.help)
    for param in getattr(command, "params", []):
        _tidy(param)
    if callable(getattr(command, "get_help_option", None)):
        command.get_help_option = _tidied_help_option(command.get_help_option)
    for sub in (getattr(command, "commands", None) or {}).values():
        tidy_help(sub)
    return command
