"""Every exception PSE raises on purpose.

Hierarchy::

    PSEError                      base of everything below
    ├── UserError                 the user's configuration or input is wrong; fix it, run again (exit 2)
    │   ├── ConfigError           a setting, .env value or task config is invalid
    │   │   └── FallbackUnusable  fallback as root: the sandbox uid cannot start the interpreter
    │   ├── TaskNotFoundError     no task of that name in any tasks directory
    │   └── CassetteError         a cassette file is missing, unreadable or not of the cassette format
    ├── RunFailure                the run cannot go on; the engine records it as outcome ERROR (CLI exit 3)
    │   ├── ModelUnavailableError the model API did not answer usefully after bounded retries
    │   ├── ModelAuthError        the model API refused our credentials (never retried)
    │   ├── ContextWindowError    a role's prompt does not fit its model's context window
    │   ├── CassetteExhaustedError a scripted role asked for a turn its cassette does not have
    │   ├── ReplayMismatchError   strict replay: a request differs from the recorded one
    │   │   └── ToolReplayMismatchError  --replay-tools: a tool call differs from the recorded one
    │   ├── ToolInfrastructureError the sandbox itself failed (not the command it ran)
    │   └── EmbeddingBackendError the knowledge base's embedding backend (Ollama, OpenAI) is unreachable
    ├── ProtocolError             a model's message breaks the protocol (no verdict, two plans, ...);
    │   │                         the engine records it, it never escapes a run
    │   └── SandboxViolation      a tool request points outside the run workspace (absolute path, `..`,
    │                             escaping symlink); the ToolAgent answers it as a denied result
    ├── ControlSignal             not an error: tells the loop to stop
    │   └── RunCancelled          cancelled from outside (Ctrl-C, dashboard)
    ├── TooManyRuns               the dashboard already executes MAX_ACTIVE_RUNS runs; nobody's mistake,
    │                             try again when one ends (HTTP 429)
    └── InternalError             a check inside PSE failed: a bug in PSE, never in the user's input;
        │                         also an AssertionError, it propagates (CLI exit 3, with a traceback)
        └── IllegalTransition     the engine tried a transition its state table does not allow

Warnings (issued with `warnings.warn`, shown once per process; the command goes on)::

    PSEWarning                    a UserWarning: something is probably not what you meant
    ├── UnknownVariableWarning    a PSE_* variable of the environment or .env is no setting (it is ignored)
    ├── UnregisteredTasksWarning  a tasks directory has no registry.toml, so its task folders are not used
    └── UnscrubbedSecretWarning   a configured secret is too short to be scrubbed from a recorded cassette

The loop's error rule: a model's mistake (bad XML, a denied tool call, a missing
verdict) is an observation the model sees or a review ERROR recorded in the
trace, and the loop goes on by its rules; infrastructure failure (RunFailure)
ends the run as ERROR without burning a retry; anything else is a bug in our
code and propagates (`InternalError` when our own check catches it).
"""

from __future__ import annotations

__all__ = [
    "CassetteError",
    "CassetteExhaustedError",
    "ConfigError",
    "ContextWindowError",
    "ControlSignal",
    "EmbeddingBackendError",
    "FallbackUnusable",
    "IllegalTransition",
    "InternalError",
    "ModelAuthError",
    "ModelUnavailableError",
    "PSEError",
    "PSEWarning",
    "ProtocolError",
    "ReplayMismatchError",
    "RunCancelled",
    "RunFailure",
    "SandboxViolation",
    "TaskNotFoundError",
    "TooManyRuns",
    "ToolInfrastructureError",
    "ToolReplayMismatchError",
    "UnknownVariableWarning",
    "UnregisteredTasksWarning",
    "UnscrubbedSecretWarning",
    "UserError",
]


class PSEError(Exception):
    """Base of every exception PSE raises on purpose."""


class UserError(PSEError):
    """A mistake in the user's configuration or input. The message says what and how to fix it."""


class ConfigError(UserError):
    """A setting, a `.env` value or a task configuration is invalid."""


class FallbackUnusable(ConfigError):
    """PSE runs as root without bubblewrap, and the sandbox uid cannot start the Python interpreter (one
    under a folder other users cannot enter): no tool command could run."""


class TaskNotFoundError(UserError):
    """No task of the requested name exists in any tasks directory."""


class CassetteError(UserError):
    """A cassette file is missing, unreadable, or not in the cassette format."""


class RunFailure(PSEError):
    """The run cannot continue for a reason outside the roles' control; it ends as ERROR."""


class ModelUnavailableError(RunFailure):
    """The model API timed out, rate-limited or failed after the bounded retries."""


class ContextWindowError(RunFailure):
    """A role's prompt does not fit its model's context window (counted before the call, or refused by the
    provider); retrying the same prompt would not help. The message names the role, the numbers, the fixes."""


class ModelAuthError(RunFailure):
    """The model API rejected the credentials. Retrying would not help."""


class CassetteExhaustedError(RunFailure):
    """A scripted role asked for more turns than its cassette holds."""

    def __init__(self, role: str, turn: int, available: int) -> None:
        self.role = role
        self.turn = turn
        self.available = available
        super().__init__(
            f"cassette has no turn {turn} for role {role} (it holds {available} turn(s) for {role}); "
            f"add a {role} turn to the cassette or check why the run needed one more"
        )


class ReplayMismatchError(RunFailure):
    """Strict replay found a request that differs from the recorded one."""


class ToolReplayMismatchError(ReplayMismatchError):
    """Tools replayed from a cassette (`--replay-tools`): a call differs from the recorded one, or the
    recording has no more tool runs. Nothing is executed in its place."""


class ToolInfrastructureError(RunFailure):
    """The sandbox or tool machinery failed; the command the role asked for is not to blame."""


class EmbeddingBackendError(RunFailure):
    """The knowledge base's embedding backend did not answer usefully; searches fail, never return empty."""


class ProtocolError(PSEError):
    """A model's message breaks the protocol: a missing, duplicated or malformed plan, verdict or tag."""


class SandboxViolation(ProtocolError):
    """A tool request names a path outside the run workspace; it is denied, never executed."""


class ControlSignal(PSEError):
    """Not an error: a request to stop the loop."""


class RunCancelled(ControlSignal):
    """The run was cancelled from outside (Ctrl-C, the dashboard)."""


class TooManyRuns(PSEError):
    """The dashboard already executes `MAX_ACTIVE_RUNS` runs; a new one may start when one ends."""


class InternalError(PSEError, AssertionError):
    """A check inside PSE failed: a bug in PSE, not in the task, the settings or a model's output.

    It is an `AssertionError` as well, so code that treats failed assertions as bugs treats it alike.
    """


class IllegalTransition(InternalError):
    """The engine tried a transition its state table does not allow: a bug in the engine."""


class PSEWarning(UserWarning):
    """Base of PSE's warnings: something is probably not what you meant, and the command goes on."""


class UnknownVariableWarning(PSEWarning):
    """A `PSE_*` variable of the environment or `.env` is no setting; it is ignored (a typo?)."""


class UnregisteredTasksWarning(PSEWarning):
    """A tasks directory has no `registry.toml`, so the task folders in it are not used."""


class UnscrubbedSecretWarning(PSEWarning):
    """A configured secret is shorter than 8 characters, so a recorded cassette keeps it as it is."""
