"""The typed task configuration (`task.toml`) and registry file (`registry.toml`)."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from pse.mcp import McpServerSpec, server_name_problem
from pse.tasks._check_commands import command_checks, command_problem
from pse.tasks._mcp_config import mcp_problems
from pse.toolagent import PolicyOverrides
from pse.tools import BUILTIN_CHECKS, Tool, check_config_reason

__all__ = [
    "BUILTIN_CHECKS",
    "REPOSITORY_CHECK",
    "TASK_ERROR",
    "InputSpec",
    "LimitOverrides",
    "RegistryEntry",
    "RegistryFile",
    "ReportSpec",
    "RepositorySpec",
    "SandboxSpec",
    "TaskConfig",
    "VerificationSpec",
]

KNOWN_TOOLS: tuple[str, ...] = tuple(Tool)
"""Every tool the ToolAgent knows."""

_PLUGIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
"""A pytest plugin as `-p` takes it: an entry-point name or a module path (never `no:NAME`)."""

TASK_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


TASK_ERROR = "task"
"""The error type of a problem spanning several keys of task.toml (its context holds the fix)."""


def _task_problem(message: str, fix: str) -> PydanticCustomError:
    return PydanticCustomError(TASK_ERROR, "{message}", {"fix": fix, "message": message})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _relative_path(value: str, what: str) -> str:
    """Reject absolute paths and `..`: everything a task names lives inside its folder or the workspace."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"{what} {value!r} must be a relative path without '..' (e.g. 'data/metrics.csv')")
    return value


class InputSpec(_Strict):
    """One run input (`pse run TASK --input NAME=VALUE`)."""

    description: str
    default: str | None = None
    required: bool = False

    @model_validator(mode="after")
    def _default_or_optional(self) -> InputSpec:
        if self.required and self.default is not None:
            raise ValueError("an input cannot be required and have a default; drop one of them")
        return self


class LimitOverrides(_Strict):
    """Per-task overrides of the engine limits; the same bounds as the `PSE_*` settings."""

    max_partial_retries: int | None = Field(default=None, ge=0)
    max_fail_retries: int | None = Field(default=None, ge=0)
    max_criterion_failures: int | None = Field(default=None, ge=1)
    turns_per_cycle: int | None = Field(default=None, ge=3)
    run_timeout_s: float | None = Field(default=None, gt=0)
    token_budget: int | None = Field(default=None, gt=0)
    cost_budget: float | None = Field(default=None, gt=0)
    step_buffer_tokens: int | None = Field(default=None, ge=100)
    max_step_retries: int | None = Field(default=None, ge=0)
    max_steps: int | None = Field(default=None, ge=1)
    max_parallel_steps: int | None = Field(default=None, ge=1)


class ReportSpec(_Strict):
    """Where a run's `report.md` comes from: a workspace file, or a tagged part of the Specialist's report."""

    file: str | None = Field(default=None, description="workspace path copied as report.md")
    tag: str | None = Field(
        default=None, description="text between <tag> and </tag> in the Specialist's last report"
    )

    @field_validator("file")
    @classmethod
    def _file_relative(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value, "report file")

    @field_validator("tag")
    @classmethod
    def _tag_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", value):
            raise ValueError(f"report tag {value!r} must be a bare tag name such as 'report'")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> ReportSpec:
        if (self.file is None) == (self.tag is None):
            raise ValueError(
                "set exactly one of report.file (a workspace file) or report.tag (e.g. 'report')"
            )
        return self


class VerificationSpec(_Strict):
    """How the gates verify the work (`[verification]` of task.toml)."""

    check_config_files: list[str] = Field(
        default_factory=list,
        description="check-configuration files roles may write (conftest.py, a ruff.toml...); every check "
        "run then uses them and says a role wrote them",
    )
    independent_tests: bool | None = Field(
        default=None,
        description="a PASS needs passing tests the Evaluator wrote itself in its evaluation area (unset: "
        "where pytest is required and the task seeds no test file or folder, runs as one task and not on "
        "a repository)",
    )
    targets: dict[str, str] = Field(
        default_factory=dict,
        description="pytest / ruff -> the workspace path their last run must cover (default '.')",
    )
    pytest_plugins: list[str] = Field(
        default_factory=list,
        description="pytest plugins run_pytest loads, by entry-point or module name (e.g. 'asyncio'); "
        "no other installed plugin is loaded",
    )
    block_findings: Literal["high", "medium", "low", "none"] = Field(
        default="high",
        description="the gate rule for the verdict's <finding>s: a PASS with a finding of this severity or a "
        "worse one does not stand ('none': findings never block)",
    )
    ruff_fix: bool = Field(
        default=True,
        description="when ruff is a required check, write_file applies ruff's safe fixes (sorted imports, "
        "an unused import...) to each Python file a role writes, in the sandbox under the configuration "
        "run_ruff uses; the record names the fixed codes, and the Evaluator's run_ruff still decides",
    )
    commands: list[str] = Field(
        default_factory=list,
        description="the repository's own check commands, run in the sandbox over the sealed snapshot like "
        "any declared check ({python} and {task_dir} filled in): each is the check 'commandN' (N from 1, in "
        'this order) the Evaluator must run with run_check(name="commandN"), and its last run must succeed',
    )
    evidence: list[str] = Field(
        default_factory=list,
        description="workspace paths or globs (fnmatch: '*' also crosses folders, 'pkg/*') of files roles "
        "write that checks may see besides the outputs (support modules, fixtures); every other file a "
        "role wrote is left out of the checks' snapshot",
    )

    @field_validator("commands", mode="before")
    @classmethod
    def _commands(cls, value: Any) -> Any:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            shown = json.dumps([value] if isinstance(value, str) else ["COMMAND", "..."])
            raise _task_problem(f"{value!r} is not a list of command strings", f"write commands = {shown}")
        for name, command in command_checks(value).items():
            problem = command_problem(name, command)
            if problem is not None:
                fix = "use only {python} and {task_dir}" if command.strip() else "give it, or drop the entry"
                raise _task_problem(problem, fix)
        return value

    @field_validator("evidence")
    @classmethod
    def _evidence_globs(cls, value: list[str]) -> list[str]:
        for item in value:
            _relative_path(item, "evidence")
            if check_config_reason(item) is not None:
                raise ValueError(
                    f"evidence: {item!r} is a check-configuration file; list it in check_config_files instead"
                )
        return value

    @field_validator("check_config_files")
    @classmethod
    def _config_files(cls, value: list[str]) -> list[str]:
        for item in value:
            _relative_path(item, "check-configuration file")
            if check_config_reason(item) is None:
                raise ValueError(
                    f"{item!r} is not a check-configuration file (roles may write it anyway); "
                    "list only files such as conftest.py, pytest.ini, ruff.toml"
                )
        return value

    @field_validator("pytest_plugins")
    @classmethod
    def _plugin_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _PLUGIN_NAME.fullmatch(name):
                raise ValueError(
                    f"pytest_plugins: {name!r} is not a plugin name; give an entry-point or module name "
                    "such as 'asyncio' or 'pytest_asyncio.plugin'"
                )
        return value

    @field_validator("targets")
    @classmethod
    def _targets(cls, value: dict[str, str]) -> dict[str, str]:
        for check, target in value.items():
            if check not in BUILTIN_CHECKS:
                raise ValueError(f"targets.{check}: only {', '.join(BUILTIN_CHECKS)} take a target")
            if target != ".":
                _relative_path(target, f"targets.{check}")
        return value


_AUTHOR = re.compile(r"[^<>\n]+ <[^<>\s]+>")
REPOSITORY_CHECK = "tests"
"""The check a run's `[repository] test_command_input` declares (`run_check(name="tests")`)."""


class RepositorySpec(_Strict):
    """How a run on a repository (`pse run TASK --repo PATH`) treats it (`[repository]` of task.toml)."""

    protected: list[str] | None = Field(
        default=None,
        description="paths or globs of the repository's files (at the base ref) no role may change; a glob "
        "without '/' matches a file name at any depth. Default: the test files and test configuration "
        "pytest would discover (test_*.py, *_test.py, tests/*, conftest.py, pytest.ini, pyproject.toml...); "
        "[] opens them all",
    )
    author: str | None = Field(
        default=None,
        description="the author of the run's commit, 'Name <email>' (default 'PSE <pse@localhost>')",
    )
    required: bool = Field(
        default=False, description="the task works only on a repository: a run without --repo is refused"
    )
    test_command_input: str | None = Field(
        default=None,
        description="an optional input whose value, when a run gives it, is the repository's check command: "
        f"the declared check '{REPOSITORY_CHECK}', required in place of pytest (default: run_pytest on the "
        "repository's tests)",
    )

    @field_validator("protected")
    @classmethod
    def _globs(cls, value: list[str] | None) -> list[str] | None:
        for item in value or []:
            _relative_path(item, "protected")
        return value

    @field_validator("author")
    @classmethod
    def _author(cls, value: str | None) -> str | None:
        if value is not None and not _AUTHOR.fullmatch(value.strip()):
            raise ValueError(
                f"author: {value!r} is not 'Name <email>' (e.g. 'Ada Lovelace <ada@example.org>')"
            )
        return value


class SandboxSpec(_Strict):
    """What the task lets its sandbox do beyond the defaults (`[sandbox]` of task.toml)."""

    network: list[str] = Field(
        default_factory=list,
        description="MCP servers (by name) that may reach the network; tool commands never do",
    )


class TaskConfig(_Strict):
    """A task's `task.toml`. Unknown keys are errors, so a typo never passes silently."""

    description: str = Field(min_length=1, description="one line, shown by `pse list`")
    goal: str = Field(min_length=1, description="what the run must achieve; opens the task message")
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    seed: list[str] = Field(default_factory=list, description="task-folder paths copied into the workspace")
    expected_outputs: list[str] = Field(default_factory=list, description="workspace paths a PASS needs")
    required_checks: list[str] = Field(
        default_factory=list, description="'pytest', 'ruff' or a declared check"
    )
    checks: dict[str, str] = Field(
        default_factory=dict, description="name -> command; placeholders {python} and {task_dir}"
    )
    policy: PolicyOverrides = Field(
        default_factory=PolicyOverrides,
        description="role -> tool -> mode or { mode, budget }: the ToolAgent's format, PolicyOverrides",
    )
    limits: LimitOverrides = Field(default_factory=LimitOverrides)
    report: ReportSpec | None = None
    verification: VerificationSpec = Field(default_factory=VerificationSpec)
    cassette: str | None = Field(default=None, description="default cassette, relative to the task folder")
    mcp: dict[str, McpServerSpec] = Field(
        default_factory=dict, description="name -> a stdio MCP server the run starts in its sandbox"
    )
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    repository: RepositorySpec = Field(default_factory=RepositorySpec)
    execution: Literal["task", "steps"] = Field(
        "task",
        description="task: each cycle reviews the whole task; steps: the plan is a graph of steps, each "
        "executed and reviewed on its own, independent ones at once",
    )

    @field_validator("inputs", "checks")
    @classmethod
    def _identifier_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
                raise ValueError(
                    f"name {key!r} must start with a letter and hold only letters, digits, '_', '-'"
                )
        return value

    @field_validator("mcp")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerSpec]) -> dict[str, McpServerSpec]:
        for name in value:
            problem = server_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _mcp_fits(self) -> TaskConfig:
        found = mcp_problems(self.mcp, self.sandbox.network, self.policy)
        if found:
            errors: list[InitErrorDetails] = [
                {"type": _task_problem(message, fix), "loc": loc, "input": None}
                for loc, message, fix in found
            ]
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @field_validator("seed", "expected_outputs")
    @classmethod
    def _relative_paths(cls, value: list[str]) -> list[str]:
        return [_relative_path(item, "path") for item in value]

    @field_validator("cassette")
    @classmethod
    def _cassette_relative(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value, "cassette")

    @field_validator("checks")
    @classmethod
    def _known_placeholders(cls, value: dict[str, str]) -> dict[str, str]:
        for name, command in value.items():
            problem = command_problem(name, command)
            if problem is not None:
                raise ValueError(problem)
        return value

    @property
    def all_checks(self) -> dict[str, str]:
        """Every declared check by name: `[checks]`, then each `[verification] commands` entry."""
        return {**self.checks, **command_checks(self.verification.commands)}

    @property
    def all_required_checks(self) -> list[str]:
        """The checks a PASS needs: `required_checks`, then each `[verification] commands` entry's check."""
        named = [
            name for name in command_checks(self.verification.commands) if name not in self.required_checks
        ]
        return [*self.required_checks, *named]


class RegistryEntry(_Strict):
    """One `[tasks.NAME]` table of `registry.toml`."""

    path: str | None = Field(
        default=None, description="task folder relative to registry.toml (default: the name)"
    )

    @field_validator("path")
    @classmethod
    def _path_relative(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value, "task path")


class RegistryFile(_Strict):
    """A whole `registry.toml`: `[tasks.NAME]` tables."""

    tasks: dict[str, RegistryEntry] = Field(default_factory=dict)
