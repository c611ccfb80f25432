"""The `pse` command line.

Importing this package imports nothing else: `main` loads the command tree when it runs (and each
command's module only when that command runs), and `app`, the Typer application, is loaded when it
is first asked for.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pse.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    """The `pse` console command. `pse --version` and `pse --help` answer before any command, typer or
    rich is loaded."""
    if sys.argv[1:] == ["--version"]:
        from pse.cli._version import package_version

        print(f"pse {package_version()}")
        sys.exit(0)
    if sys.argv[1:] == ["--help"]:
        from pse.cli._tree import root_help

        print(root_help(), end="")
        sys.exit(0)
    from pse.cli._app import main as run_command

    run_command()


def __getattr__(name: str) -> Any:
    if name == "app":
        from pse.cli._app import app

        return app
    raise AttributeError(f"module 'pse.cli' has no attribute {name!r}")
