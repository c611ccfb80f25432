"""What `validate` checks in one task folder and one tasks directory; every problem at once, with its fix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from pse._suggest import did_you_mean
from pse.exceptions import ConfigError
from pse.roles import ROLES
from pse.tasks._check_commands import command_checks
from pse.tasks._config import BUILTIN_CHECKS, REPOSITORY_CHECK, TASK_ERROR, TaskConfig
from pse.tasks._explain import explain
from pse.tasks._rules_config import RulesFile, load_rows
from pse.tasks._task import RULES_FILE, TASK_FILE, Problem, TaskLocation, role_file
from pse.tasks._toml import TomlSyntaxError, read_toml
from pse.toolagent import policy_problem
from pse.tools import pytest_plugin_missing

__all__ = ["load_task_config", "model_problem", "task_problems", "toml_problem", "unregistered_folders"]

_TASK_DIR_REF = re.compile(r"\{task_dir\}/([^\s'\"]+)")
_TASK_MARKERS = (TASK_FILE, "planner.md", "specialist.md", "evaluator.md")


def load_task_config(location: TaskLocation) -> tuple[TaskConfig | None, list[Problem]]:
    """Parse `task.toml`; on failure return None and one Problem per pydantic error (with its field path)."""
    path = location.dir / TASK_FILE
    if not path.is_file():
        return None, [
            Problem(
                file=str(path),
                message="task config missing",
                fix=f"create {TASK_FILE} with at least description and goal (see docs/tasks.md)",
            )
        ]
    try:
        raw = read_toml(path)
    except TomlSyntaxError as exc:
        return None, [toml_problem(exc)]
    try:
        return TaskConfig.model_validate(raw), []
    except ValidationError as exc:
        return None, [_pydantic_problem(path, err, raw) for err in exc.errors()] + _cross_problems(path, raw)


def toml_problem(exc: TomlSyntaxError) -> Problem:
    """A TOML syntax error as one problem: the file once, the line and column, what is wrong, the line."""
    return Problem(file=str(exc.path), message=exc.problem, fix=exc.fix)


def model_problem(path: Path, model: type[BaseModel], err: ErrorDetails, raw: Any) -> Problem:
    """One validation error of a TOML file as a problem that names the key and suggests the fix."""
    message, fix = explain(model, err, raw)
    return Problem(file=str(path), message=message, fix=fix)


def task_problems(location: TaskLocation) -> list[Problem]:
    """Every problem of one task folder: prompts, config, checks, cassette, rules."""
    if not location.dir.is_dir():
        return [
            Problem(
                file=str(location.registry_file),
                message=f"task {location.name!r} is registered but its folder {location.dir} does not exist",
                fix=f"create the folder, fix its path, or remove [tasks.{location.name}] from the registry",
            )
        ]
    problems = [
        Problem(
            file=str(location.dir / role_file(role)),
            message=f"{role} prompt file missing",
            fix=f"create {role_file(role)} with the task-specific instructions for the {role}",
        )
        for role in ROLES
        if not (location.dir / role_file(role)).is_file()
    ]
    config, config_problems = load_task_config(location)
    problems += config_problems
    if config is not None:
        problems += _cross_problems(location.dir / TASK_FILE, config.model_dump())
        problems += _file_problems(location, config)
    rules = location.dir / RULES_FILE
    if rules.is_file():
        problems += _rules_problems(location.dir, rules)
    return problems


def unregistered_folders(tasks_dir: Path, registered: set[Path], registry_file: Path) -> list[Problem]:
    """Folders of `tasks_dir` that look like tasks but no registry entry points at."""
    problems = []
    for child in sorted(tasks_dir.iterdir()) if tasks_dir.is_dir() else []:
        if not child.is_dir() or child.name.startswith((".", "_")) or child.resolve() in registered:
            continue
        if any((child / marker).is_file() for marker in _TASK_MARKERS):
            problems.append(
                Problem(
                    file=str(child),
                    message=f"folder {child.name!r} has no registry entry",
                    fix=f'add [tasks.{child.name}] with path = "{child.name}" to {registry_file}',
                )
            )
    return problems


def _pydantic_problem(path: Path, err: ErrorDetails, raw: Any) -> Problem:
    if err["type"] == TASK_ERROR:  # a problem across keys (MCP servers, their network, their grants)
        key = ".".join(str(part) for part in err["loc"])
        return Problem(file=str(path), message=f"{key}: {err['msg']}", fix=str((err.get("ctx") or {})["fix"]))
    if err["loc"][:1] == ("policy",):  # the policy model's own problems, described as a run reports them
        policy = policy_problem(err, err["loc"][1:])
        return Problem(file=str(path), message=f"{policy.key}: {policy.message}", fix=policy.fix)
    return model_problem(path, TaskConfig, err, raw)


def _cross_problems(path: Path, raw: dict[str, Any]) -> list[Problem]:
    """Checks spanning several keys, done on raw data too, so they show even when a field is invalid."""
    checks: dict[str, Any] = raw["checks"] if isinstance(raw.get("checks"), dict) else {}
    required: list[Any] = raw["required_checks"] if isinstance(raw.get("required_checks"), list) else []
    commands = _commands(raw)
    known = [*BUILTIN_CHECKS, *checks, *commands]
    undeclared = [
        Problem(
            file=str(path),
            message=f"required check {name!r} is neither built-in ({', '.join(BUILTIN_CHECKS)}) nor declared"
            + (f" (declared: {', '.join([*checks, *commands])})" if checks or commands else ""),
            fix=(f"{hint} Or declare" if (hint := did_you_mean(name, known)) else "Declare")
            + f' it: [checks] {name} = "{{python}} {{task_dir}}/checks/{name}.py", or remove it',
        )
        for name in required
        if isinstance(name, str) and name not in known
    ]
    return _test_command_problems(path, raw, checks) + _command_problems(path, commands, checks) + undeclared


def _commands(raw: dict[str, Any]) -> list[str]:
    """The check names `[verification] commands` declares (none when the key is not a list of strings)."""
    verification = raw.get("verification") if isinstance(raw.get("verification"), dict) else {}
    commands = (verification or {}).get("commands")
    if not isinstance(commands, list) or not all(isinstance(item, str) for item in commands):
        return []
    return list(command_checks(commands))


def _command_problems(path: Path, commands: list[str], checks: dict[str, Any]) -> list[Problem]:
    """A check `[verification] commands` declares (`command1`...) is not declared in `[checks]` too."""
    return [
        Problem(
            file=str(path),
            message=f"[verification] commands: the check {name!r} it declares is declared in [checks] too",
            fix=f"rename [checks] {name}, or move its command into [verification] commands",
        )
        for name in commands
        if name in checks
    ]


def _test_command_problems(path: Path, raw: dict[str, Any], checks: dict[str, Any]) -> list[Problem]:
    """`[repository] test_command_input` names an optional input, and its check's name is free."""
    repository = raw.get("repository") if isinstance(raw.get("repository"), dict) else {}
    name = (repository or {}).get("test_command_input")
    if not isinstance(name, str):
        return []
    inputs = raw["inputs"] if isinstance(raw.get("inputs"), dict) else {}
    where, problems = "[repository] test_command_input", []
    if name not in inputs:
        problems.append(
            Problem(
                file=str(path),
                message=f"{where}: no input {name!r}",
                fix=f'declare it: [inputs.{name}] description = "the repository\'s check command"',
            )
        )
    elif isinstance(inputs[name], dict) and inputs[name].get("required"):
        problems.append(
            Problem(
                file=str(path),
                message=f"{where}: input {name!r} is required, so the default check (pytest) never runs",
                fix=f"make [inputs.{name}] optional (required = false)",
            )
        )
    if REPOSITORY_CHECK in checks:
        problems.append(
            Problem(
                file=str(path),
                message=f"{where}: the check {REPOSITORY_CHECK!r} it declares is declared in [checks] too",
                fix=f"rename [checks] {REPOSITORY_CHECK}",
            )
        )
    return problems


def _file_problems(location: TaskLocation, config: TaskConfig) -> list[Problem]:
    task_file, problems = str(location.dir / TASK_FILE), []
    for name, command in config.all_checks.items():
        for ref in _TASK_DIR_REF.findall(command):
            if not (location.dir / ref).exists():
                problems.append(
                    Problem(
                        file=task_file,
                        message=f"check {name!r} runs {ref}, which does not exist",
                        fix=f"create {location.dir / ref} or fix the command",
                    )
                )
    for server, spec in config.mcp.items():
        for ref in (ref for arg in spec.command for ref in _TASK_DIR_REF.findall(arg)):
            if not (location.dir / ref).exists():
                problems.append(
                    Problem(
                        file=task_file,
                        message=f"MCP server {server!r} runs {ref}, which does not exist",
                        fix=f"create {location.dir / ref} or fix mcp.{server}.command",
                    )
                )
    for plugin in filter(pytest_plugin_missing, config.verification.pytest_plugins):
        problems.append(
            Problem(
                file=task_file,
                message=f"pytest plugin {plugin!r} ([verification] pytest_plugins) is not installed",
                fix="install it next to PSE, or remove it from pytest_plugins",
            )
        )
    for item in config.seed:
        if not (location.dir / item).exists():
            problems.append(
                Problem(
                    file=task_file,
                    message=f"seed path {item!r} does not exist",
                    fix=f"create {location.dir / item} or remove it from seed",
                )
            )
    if config.cassette is not None:
        cassette = location.dir / config.cassette
        if not cassette.is_file():
            problems.append(
                Problem(
                    file=task_file,
                    message=f"cassette {config.cassette!r} does not exist ({cassette})",
                    fix=f"record one with `pse run {location.name} --record {cassette}` "
                    "or remove the cassette key",
                )
            )
        else:
            problems += _cassette_problems(cassette)
    return problems


def _cassette_problems(path: Path) -> list[Problem]:
    # A shallow look only: the model layer owns the cassette format and checks it fully on replay.
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [
            Problem(
                file=str(path),
                message=f"cassette is not readable JSON ({exc})",
                fix="fix the JSON or record the cassette again",
            )
        ]
    if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
        return [
            Problem(
                file=str(path),
                message="cassette has no 'turns' list",
                fix='use the format {"version": 1, "turns": [{"role": "Planner", "content": "..."}]}',
            )
        ]
    return []


def _rules_problems(task_dir: Path, path: Path) -> list[Problem]:
    try:
        raw = read_toml(path)
    except TomlSyntaxError as exc:
        return [toml_problem(exc)]
    try:
        rules = RulesFile.model_validate(raw)
    except ValidationError as exc:
        return [model_problem(path, RulesFile, err, raw) for err in exc.errors()]
    problems: list[Problem] = []
    ids = [rule.id for rule in rules.rules]
    problems += [
        Problem(file=str(path), message=f"rule id {i!r} is used more than once", fix="make rule ids unique")
        for i in sorted({i for i in ids if ids.count(i) > 1})
    ]
    columns: dict[str, set[str] | None] = {}
    for name, source in rules.sources.items():
        try:
            rows = load_rows(task_dir, source)
            columns[name] = {key for row in rows for key in row}
        except ConfigError as exc:
            problems.append(
                Problem(file=str(path), message=f"source {name!r}: {exc}", fix="fix the source path")
            )
            columns[name] = None
        if (
            source.timestamp
            and columns.get(name) is not None
            and source.timestamp not in (columns[name] or set())
        ):
            problems.append(
                Problem(
                    file=str(path),
                    message=f"source {name!r} has no timestamp column {source.timestamp!r}",
                    fix="fix the timestamp column name",
                )
            )
    for rule_id, source_name, cols in rules.references():
        if source_name not in rules.sources:
            problems.append(
                Problem(
                    file=str(path),
                    message=f"rule {rule_id!r} uses unknown source {source_name!r}",
                    fix=f"declare [sources.{source_name}] or fix the name "
                    f"(declared: {', '.join(rules.sources)})",
                )
            )
            continue
        known = columns.get(source_name)
        for col in cols if known is not None else []:
            if col not in known:  # type: ignore[operator]
                problems.append(
                    Problem(
                        file=str(path),
                        message=f"rule {rule_id!r}: source {source_name!r} has no column {col!r}",
                        fix=f"use one of {', '.join(sorted(known or []))}",
                    )
                )
    for rule_id, source_name in rules.timed_sources():
        timed = rules.sources.get(source_name)
        if timed is not None and timed.timestamp is None:
            problems.append(
                Problem(
                    file=str(path),
                    message=f"rule {rule_id!r} needs timestamps but source {source_name!r} declares none",
                    fix=f'set timestamp = "COLUMN" in [sources.{source_name}]',
                )
            )
    return problems
