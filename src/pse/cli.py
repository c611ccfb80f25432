"""Command line entry point (placeholder until the task platform lands)."""

import sys


def main() -> None:
    print("pse: the CLI is not built yet", file=sys.stderr)
    raise SystemExit(2)
