"""PSE: Planner / Specialist / Evaluator loops on AutoGen, with a ToolAgent that alone holds side effects.

Python API (the CLI's `pse run`, from code)::

    import pse

    summary = pse.run("code-delivery", runs_dir="/tmp/pse-runs")      # blocking
    summary = await pse.arun("incident-review", max_partial_retries=1)  # async
    print(summary.outcome, summary.trace)

The names are imported lazily, so `import pse` stays cheap until a run is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["RunSummary", "Settings", "__version__", "arun", "load_settings", "run"]

if TYPE_CHECKING:
    from pse.config import Settings, load_settings
    from pse.runner import RunSummary, arun, run

_LAZY = {
    "RunSummary": "pse.runner",
    "arun": "pse.runner",
    "run": "pse.runner",
    "Settings": "pse.config",
    "load_settings": "pse.config",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pse' has no attribute {name!r}")
