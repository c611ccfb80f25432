"""The `pse` command line."""

from pse.cli._app import app, main

__all__ = ["app", "main"]
