"""A user suite read from its folder: suite.toml, instances.jsonl and hidden/, each problem with its fix."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pse.evals._impossible import (
    IMPOSSIBLE,
    IMPOSSIBLE_SUFFIX,
    mutation_candidates,
)
from pse.evals._suite_model import (
    BUILTIN_SUITES,
    Instance,
    Suite,
    SuiteConfig,
    VisibleTests,
)
from pse.exceptions import TaskNotFoundError, UserError
from pse.repo import repository_folder
from pse.tasks import Problem, Task, TaskRegistry

__all__ = ["HIDDEN_DIR", "INSTANCES_FILE", "INSTANCE_ID_RE", "SUITE_FILE", "read_suite_folder"]


SUITE_FILE = "suite.toml"
INSTANCES_FILE = "instances.jsonl"
HIDDEN_DIR = "hidden"


INSTANCE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
"""An instance id names files (`--cassettes DIR/<arm>/<id>.json`): letters, digits, `.`, `_`, `-`."""
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_KNOWN_PLACEHOLDERS = {"hidden", "workspace", "python"}


class _InstanceLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    inputs: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    hidden_check: list[str] = Field(min_length=1)
    base: str | None = None


def read_suite_folder(folder: Path, registry: TaskRegistry) -> tuple[list[Problem], Suite | None]:
    if not folder.is_dir():
        known = ", ".join(BUILTIN_SUITES)
        return [
            Problem(
                file=str(folder),
                message="no such suite: not a folder and not a built-in suite",
                fix=f"pass a suite folder (holding {SUITE_FILE} and {INSTANCES_FILE}) or one of: {known}",
            )
        ], None
    problems: list[Problem] = []
    config = _read_config(folder / SUITE_FILE, problems)
    task = _task_of(folder, config, registry, problems) if config is not None else None
    hidden = folder / HIDDEN_DIR
    instances = _read_instances(folder / INSTANCES_FILE, hidden, task, problems)
    if task is not None and hidden.exists() and _inside(hidden, task.dir):
        problems.append(
            Problem(
                file=str(hidden),
                message=f"the hidden folder is inside task {task.name!r}'s folder, which the roles read "
                "(its knowledge, its checks)",
                fix="move the suite folder out of the task folder",
            )
        )
    visible = _impossible_config(folder / SUITE_FILE, config, instances, problems) if config else None
    repo = _repository(folder, config, hidden, instances, problems) if config is not None else None
    if problems or config is None:
        return problems, None
    return [], Suite(
        name=folder.resolve().name,
        config=config,
        instances=tuple(instances),
        hidden_dir=hidden.resolve() if hidden.is_dir() else None,
        secret_paths=(hidden.resolve(),) if hidden.exists() else (),
        source=str(folder.resolve()),
        visible_tests=visible,
        repo=repo,
    )


def _repository(
    folder: Path, config: SuiteConfig, hidden: Path, instances: Sequence[Instance], problems: list[Problem]
) -> Path | None:
    """A repository suite's repository: a git repository that does not hold the hidden folder (every
    role reads a worktree of it)."""
    where = str(folder / SUITE_FILE)
    if config.repo is None:
        if config.base is not None or any(i.ref is not None for i in instances):
            problems.append(
                Problem(
                    file=where,
                    message="a base ref is given, and the suite names no repository",
                    fix='name it: repo = "PATH" in suite.toml, or drop base',
                )
            )
        return None
    try:
        repo = repository_folder(folder / Path(config.repo).expanduser())
    except UserError as exc:
        problems.append(Problem(file=where, message=f"repo: {exc}", fix="name the suite's git repository"))
        return None
    if hidden.exists() and _inside(hidden, repo):
        problems.append(
            Problem(
                file=where,
                message=f"the hidden folder is inside the repository {repo}, which every role reads",
                fix="move the hidden folder (or the repository) so that the repository does not hold it",
            )
        )
    return repo


def _impossible_config(
    path: Path, config: SuiteConfig, instances: Sequence[Instance], problems: list[Problem]
) -> VisibleTests | None:
    """`[variant.impossible]`: every instance holds the test file, and it has an assertion to mutate."""
    unknown = sorted(set(config.variant) - {IMPOSSIBLE})
    if unknown:
        problems.append(
            Problem(
                file=str(path),
                message=f"variant: unknown variant(s) {', '.join(unknown)}",
                fix=f"the one variant a suite declares is [variant.{IMPOSSIBLE}]",
            )
        )
    declared = config.variant.get(IMPOSSIBLE)
    if declared is None:
        return None
    test_file = declared.test_file
    ids = {i.id for i in instances}
    for instance in instances:
        where = f"{path.with_name(INSTANCES_FILE)}: instance {instance.id}"
        if instance.id + IMPOSSIBLE_SUFFIX in ids:
            problems.append(
                Problem(
                    file=where,
                    message=f"its impossible variant's id {instance.id + IMPOSSIBLE_SUFFIX!r} is another "
                    "instance's id",
                    fix=f"rename the instance whose id ends in {IMPOSSIBLE_SUFFIX!r}",
                )
            )
        source = instance.files.get(test_file)
        if source is None:
            problems.append(
                Problem(
                    file=where,
                    message=f"[variant.impossible] test_file {test_file!r} is not in its files",
                    fix=f'give every instance the visible tests: "files": {{"{test_file}": "…"}}',
                )
            )
            continue
        try:
            found = mutation_candidates(source)
        except ValueError as exc:
            found, why = [], str(exc)
        else:
            why = "no assertion of its tests can be mutated"
        if not found:
            problems.append(
                Problem(
                    file=where,
                    message=f"{test_file}: {why}",
                    fix="give a test function an `assert CALL == VALUE` (or `assert CALL`, "
                    "`assert abs(X) < TOL`)",
                )
            )
    return VisibleTests(test_file, lambda instance: instance.files[test_file])


def _read_config(path: Path, problems: list[Problem]) -> SuiteConfig | None:
    if not path.is_file():
        problems.append(
            Problem(file=str(path), message="suite config missing", fix='create it with task = "<task name>"')
        )
        return None
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(Problem(file=str(path), message=f"not valid TOML: {exc}", fix="fix the TOML syntax"))
        return None
    try:
        return SuiteConfig.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "(top level)"
            problems.append(
                Problem(
                    file=str(path),
                    message=f"{where}: {error['msg']}",
                    fix="keys: task (required), description, [limits] (task.toml's), hidden_check_timeout_s, "
                    "[variant.impossible] test_file, repo, base",
                )
            )
        return None


def _task_of(
    folder: Path, config: SuiteConfig, registry: TaskRegistry, problems: list[Problem]
) -> Task | None:
    try:
        return registry.get(config.task)
    except TaskNotFoundError as exc:
        problems.append(
            Problem(
                file=str(folder / SUITE_FILE),
                message=f"task: {exc}",
                fix="name a registered task (`pse list`), or pass --tasks-dir with the folder holding it",
            )
        )
    except UserError as exc:
        problems.append(
            Problem(file=str(folder / SUITE_FILE), message=f"task {config.task!r}: {exc}", fix="pse validate")
        )
    return None


def _read_instances(path: Path, hidden: Path, task: Task | None, problems: list[Problem]) -> list[Instance]:
    if not path.is_file():
        problems.append(
            Problem(
                file=str(path),
                message="instances file missing",
                fix='create it: one JSON object a line, {"id": …, "inputs": {…}, "hidden_check": [...]}',
            )
        )
        return []
    instances: list[Instance] = []
    seen: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        problems.append(Problem(file=str(path), message=f"not UTF-8 text: {exc}", fix="save it as UTF-8"))
        return []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        found = len(problems)
        instance = _read_line(text, where, hidden, task, problems)
        if instance is None:
            continue
        if instance.id in seen:
            problems.append(
                Problem(
                    file=where,
                    message=f"instance id {instance.id!r} is also on line {seen[instance.id]}",
                    fix="give every instance its own id",
                )
            )
        seen.setdefault(instance.id, number)
        if len(problems) == found:
            instances.append(instance)
    if not seen and not problems:
        problems.append(Problem(file=str(path), message="no instances", fix="add one JSON object a line"))
    return instances


def _read_line(
    text: str, where: str, hidden: Path, task: Task | None, problems: list[Problem]
) -> Instance | None:
    fix = (
        'one JSON object: {"id": "…", "inputs": {"KEY": "VALUE"}, "files": {"path": "text"}, '
        '"hidden_check": [...]}'
    )
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(Problem(file=where, message=f"not JSON: {exc.msg} at column {exc.colno}", fix=fix))
        return None
    if not isinstance(data, dict):
        problems.append(Problem(file=where, message=f"a JSON {type(data).__name__}, not an object", fix=fix))
        return None
    try:
        line = _InstanceLine.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = ".".join(str(p) for p in error["loc"]) or "(object)"
            problems.append(Problem(file=where, message=f"{loc}: {error['msg']}", fix=fix))
        return None
    count = len(problems)
    if not INSTANCE_ID_RE.match(line.id):
        problems.append(
            Problem(
                file=where,
                message=f"id {line.id!r} is not a file-name-safe id",
                fix="use letters, digits, '.', '_' and '-' (at most 100), starting with a letter or digit",
            )
        )
    if task is not None:
        try:
            task.resolve_inputs(line.inputs)
        except UserError as exc:
            problems.append(Problem(file=where, message=f"inputs: {exc}", fix=f"see `pse show {task.name}`"))
    for name in line.files:
        p = PurePosixPath(name)
        if not name or p.is_absolute() or ".." in p.parts or "\\" in name or name.startswith("@"):
            problems.append(
                Problem(
                    file=where,
                    message=f"files: {name!r} is not a workspace-relative path",
                    fix="a relative path without '..' (e.g. 'src/app.py')",
                )
            )
    for arg in line.hidden_check:
        for name in _PLACEHOLDER.findall(arg):
            if name not in _KNOWN_PLACEHOLDERS:
                problems.append(
                    Problem(
                        file=where,
                        message=f"hidden_check: unknown placeholder {{{name}}} in {arg!r}",
                        fix="the placeholders are {hidden}, {workspace} and {python}",
                    )
                )
        if arg.startswith("{hidden}/"):
            rest = arg.removeprefix("{hidden}/")
            if ".." in PurePosixPath(rest).parts or not (hidden / rest).is_file():
                problems.append(
                    Problem(
                        file=where,
                        message=f"hidden_check: {arg!r} names no file of {hidden}",
                        fix=f"put the file in {hidden}, or fix its name",
                    )
                )
    if len(problems) > count:
        return None
    argv = tuple(
        sys.executable if i == 0 and a in ("python", "python3") else a
        for i, a in enumerate(line.hidden_check)
    )
    argv = tuple(a.replace("{python}", sys.executable) for a in argv)
    return Instance(
        id=line.id, inputs=dict(line.inputs), files=dict(line.files), hidden_check=argv, ref=line.base
    )


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True
