"""`pse` through its real entry point, in-process: what the CLI tests share."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pse.cli import main


def pse(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """Run `pse ARGS` in-process; return (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["pse", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_info:
        main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), captured.out, captured.err


def run_turns(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    turns: list[dict[str, str]],
    cassette: Path,
    runs: Path,
    task: str = "code-delivery",
) -> tuple[int, dict[str, Any]]:
    """`pse run TASK --json` replaying `turns` (written to `cassette`); return (exit code, summary)."""
    cassette.parent.mkdir(parents=True, exist_ok=True)
    cassette.write_text(json.dumps({"version": 1, "turns": turns}))
    code, stdout, _ = pse(
        monkeypatch, capsys, "run", task, "--cassette", str(cassette), "--runs-dir", str(runs), "--json"
    )
    return code, json.loads(stdout)
