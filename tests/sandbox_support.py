"""Whether the fallback sandbox can work here, for tests that run it in a `pse` process of their own.

In-process, a test that needs fallback where it cannot work is skipped by conftest (PSE raises
`FallbackUnusable`); a subprocess only exits 2, so such tests carry `needs_fallback`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pse.exceptions import FallbackUnusable
from pse.sandbox import Identity, Sandbox, SandboxLimits
from pse.sandbox._identity import check_fallback_identity
from pse.tools import ToolContext


def _fallback_problem() -> str | None:
    try:
        check_fallback_identity(Identity.for_commands())
    except FallbackUnusable as exc:
        return str(exc)
    return None


FALLBACK_PROBLEM = _fallback_problem()
needs_fallback = pytest.mark.skipif(
    FALLBACK_PROBLEM is not None, reason=f"fallback cannot work here: {FALLBACK_PROBLEM}"
)


def evaluation_context(tmp_path: Path, files: dict[str, str]) -> tuple[ToolContext, Path, Path]:
    """A fallback-sandbox tool context whose workspace holds `files` and whose evaluation area is
    writable (an Evaluator's write_file); the context, the workspace and the area."""
    workspace, area = tmp_path / "ws", tmp_path / "evaluation"
    workspace.mkdir()
    area.mkdir()
    for name, text in files.items():
        (workspace / name).write_text(text)
    box = Sandbox(workspace, SandboxLimits(timeout_s=30), "fallback")
    ctx = ToolContext(
        Path(os.path.realpath(workspace)),
        box,
        evaluation=Path(os.path.realpath(area)),
        evaluation_writable=True,
    )
    return ctx, workspace, area
