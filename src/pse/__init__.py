"""PSE: Planner / Specialist / Evaluator loops on AutoGen, with a ToolAgent that alone holds side effects.

Python API (the CLI's `pse run`, from code)::

    import pse

    summary = pse.run("code-delivery", runs_dir="/tmp/pse-runs")      # blocking
    summary = await pse.arun("incident-review", max_partial_retries=1)  # async
    print(summary.outcome, summary.trace, summary.tokens.total)

The top level holds the run functions, the settings, every exception and warning (`pse.exceptions`:
`except pse.ConfigError`, `except pse.PSEError`) and the event types a run's `on_event` receives
(`pse.events`). Everything else public lives in the subpackages. The run functions, settings and
events are imported lazily, so `import pse` stays cheap until a run is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pse.exceptions import (
    CassetteError,
    CassetteExhaustedError,
    ConfigError,
    ContextWindowError,
    ControlSignal,
    EmbeddingBackendError,
    FallbackUnusable,
    IllegalTransition,
    InternalError,
    ModelAuthError,
    ModelUnavailableError,
    ProtocolError,
    PSEError,
    PSEWarning,
    ReplayMismatchError,
    RunCancelled,
    RunFailure,
    SandboxViolation,
    TaskNotFoundError,
    ToolInfrastructureError,
    ToolReplayMismatchError,
    TooManyRuns,
    UnknownVariableWarning,
    UnregisteredTasksWarning,
    UnscrubbedSecretWarning,
    UserError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pse.config import Settings, load_settings
    from pse.events import (
        ApprovalEvent,
        CycleStarted,
        DriftEvent,
        Event,
        FormatRepairEvent,
        MessageEvent,
        OutcomeEvent,
        RetrievalEvent,
        StepEvent,
        ToolCallEvent,
        TransitionEvent,
        VerdictEvent,
    )
    from pse.runner import RunSummary, arun, run

__all__ = [
    "ApprovalEvent",
    "CassetteError",
    "CassetteExhaustedError",
    "ConfigError",
    "ContextWindowError",
    "ControlSignal",
    "CycleStarted",
    "DriftEvent",
    "EmbeddingBackendError",
    "Event",
    "FallbackUnusable",
    "FormatRepairEvent",
    "IllegalTransition",
    "InternalError",
    "MessageEvent",
    "ModelAuthError",
    "ModelUnavailableError",
    "OutcomeEvent",
    "PSEError",
    "PSEWarning",
    "ProtocolError",
    "ReplayMismatchError",
    "RetrievalEvent",
    "RunCancelled",
    "RunFailure",
    "RunSummary",
    "SandboxViolation",
    "Settings",
    "StepEvent",
    "TaskNotFoundError",
    "TooManyRuns",
    "ToolCallEvent",
    "ToolInfrastructureError",
    "ToolReplayMismatchError",
    "TransitionEvent",
    "UnknownVariableWarning",
    "UnregisteredTasksWarning",
    "UnscrubbedSecretWarning",
    "UserError",
    "VerdictEvent",
    "__version__",
    "arun",
    "load_settings",
    "run",
]

_LAZY_MODULES = {
    "pse.config": ("Settings", "load_settings"),
    "pse.events": (
        "ApprovalEvent",
        "CycleStarted",
        "FormatRepairEvent",
        "DriftEvent",
        "Event",
        "MessageEvent",
        "OutcomeEvent",
        "RetrievalEvent",
        "StepEvent",
        "ToolCallEvent",
        "TransitionEvent",
        "VerdictEvent",
    ),
    "pse.runner": ("RunSummary", "arun", "run"),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pse' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
