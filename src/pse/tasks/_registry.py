"""Finding tasks: the built-in tasks directory plus an optional user one, each with a `registry.toml`.

A task folder no registry entry points at is never used, and never silently: a tasks directory
without `registry.toml` warns (`UnregisteredTasksWarning`) naming its folders and the fix, and
asking for a built-in task while the user's directory holds an unregistered folder of that name is
a `ConfigError` (the user meant their copy, not the built-in one).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from pse._suggest import did_you_mean
from pse.exceptions import ConfigError, TaskNotFoundError, UnregisteredTasksWarning
from pse.tasks._config import RegistryFile
from pse.tasks._paths import builtin_tasks_dir
from pse.tasks._problems import (
    load_task_config,
    model_problem,
    task_problems,
    toml_problem,
    unregistered_folders,
)
from pse.tasks._task import Problem, Task, TaskLocation
from pse.tasks._toml import TomlSyntaxError, read_toml

__all__ = ["REGISTRY_FILE", "TaskRegistry", "validate"]

REGISTRY_FILE = "registry.toml"


class TaskRegistry:
    """The tasks of one or more tasks directories, later directories winning on a name clash.

    `discover` puts the built-in directory first and the user's (`PSE_TASKS_DIR` / `--tasks-dir`) last,
    so a user task of the same name replaces the built-in one (`shadowed` records which);
    `unregistered` holds the task folders of the user's directories that no entry points at.
    """

    def __init__(self, dirs: Sequence[Path], builtin_dir: Path | None = None) -> None:
        self.dirs = [Path(d) for d in dirs]
        self.problems: list[Problem] = []
        self.locations: dict[str, TaskLocation] = {}
        self.shadowed: dict[str, TaskLocation] = {}
        self.unregistered: dict[str, Path] = {}
        self._registered: dict[Path, set[Path]] = {}
        for tasks_dir in self.dirs:
            self._read(tasks_dir, builtin=builtin_dir is not None and tasks_dir == builtin_dir)

    @classmethod
    def discover(cls, extra_dir: Path | None = None, *, optional: bool = False) -> TaskRegistry:
        """The built-in tasks plus the user's tasks directory `extra_dir`, if any.

        The settings decide `extra_dir` (`PSE_TASKS_DIR` / `--tasks-dir`; `pse.runner.registry_for`
        passes it); this method reads no environment.

        Args:
            extra_dir: the user's tasks directory.
            optional: `extra_dir` is a default nobody configured (./tasks): it is used only when it
                holds a `registry.toml` or a task folder, and its absence is no error.

        Raises:
            ConfigError: `extra_dir` was given (not `optional`) but is not a directory.
        """
        builtin = builtin_tasks_dir()
        dirs = [builtin]
        if extra_dir is not None and optional and not _holds_tasks(Path(extra_dir)):
            extra_dir = None
        if extra_dir is not None:
            extra_dir = Path(extra_dir)
            if not extra_dir.is_dir():
                raise ConfigError(
                    f"tasks directory {extra_dir} does not exist; create it (`pse new NAME` does) "
                    "or fix PSE_TASKS_DIR / --tasks-dir"
                )
            if extra_dir.resolve() != builtin.resolve():
                dirs.append(extra_dir)
        return cls(dirs, builtin_dir=builtin)

    def names(self) -> list[str]:
        """Every registered task name, sorted."""
        return sorted(self.locations)

    def location(self, name: str) -> TaskLocation:
        """Where a task lives.

        Raises:
            TaskNotFoundError: no task of that name is registered. The message names the folder of
                that name no registry entry points at (and the line to add), else the closest task
                name, else the available ones.
        """
        try:
            return self.locations[name]
        except KeyError:
            pass
        if name in self.unregistered:
            folder = self.unregistered[name]
            registry_file = folder.parent / REGISTRY_FILE
            add = "add" if registry_file.is_file() else "create it with"
            raise TaskNotFoundError(
                f"{folder} looks like a task named {name!r}, but {registry_file} has no entry for it; "
                f"{add} the line [tasks.{name}] to register it"
            )
        available = ", ".join(self.names()) or "none"
        hint = did_you_mean(name, self.names())
        if hint:
            raise TaskNotFoundError(f"no task named {name!r}; {hint} (available: {available})")
        raise TaskNotFoundError(
            f"no task named {name!r}; available: {available}. Check the spelling, or point "
            "PSE_TASKS_DIR / --tasks-dir at the directory that holds it"
        )

    def get(self, name: str) -> Task:
        """Load a task after validating it.

        Raises:
            TaskNotFoundError: no task of that name is registered.
            ConfigError: the task has problems (all listed, as `pse validate` shows them), or it is a
                built-in one while the user's tasks directory holds an unregistered folder of its name.
        """
        location = self.location(name)
        if location.builtin and name in self.unregistered:
            folder = self.unregistered[name]
            registry_file = folder.parent / REGISTRY_FILE
            state = "does not register it" if registry_file.is_file() else "does not exist"
            raise ConfigError(
                f"{folder} is a task folder named {name!r}, but {registry_file} {state}, so `{name}` would "
                f"run the built-in task instead of yours: add [tasks.{name}] to {registry_file} to run "
                "yours, or rename or remove the folder to run the built-in one"
            )
        problems = task_problems(location)
        config, _ = load_task_config(location)
        if problems or config is None:
            listed = "\n".join(f"  - {p}" for p in problems)
            raise ConfigError(
                f"task {name!r} is invalid:\n{listed}\nFix these, then check with `pse validate {name}`"
            )
        return Task(location, config)

    def description(self, name: str) -> str:
        """A task's one-line description, or a note saying why it cannot be read (for `pse list`)."""
        config, problems = load_task_config(self.location(name))
        return config.description if config is not None else f"(invalid: {len(problems)} problem(s))"

    def _read(self, tasks_dir: Path, *, builtin: bool) -> None:
        registry_file = tasks_dir / REGISTRY_FILE
        registered: set[Path] = set()
        if not registry_file.is_file():
            self._registered[tasks_dir] = registered
            if tasks_dir.is_dir() and any(tasks_dir.iterdir()):
                self.problems.append(
                    Problem(
                        file=str(registry_file),
                        message="tasks directory has no registry",
                        fix="create it with one [tasks.NAME] table per task folder",
                    )
                )
            folders = self._note_unregistered(tasks_dir, registered, builtin=builtin)
            if folders:
                warnings.warn(
                    UnregisteredTasksWarning(
                        f"tasks directory {tasks_dir} has no {REGISTRY_FILE}, so its task folder(s) "
                        f"{', '.join(folders)} are not used: create {registry_file} with one [tasks.NAME] "
                        f"table per folder, e.g. [tasks.{folders[0]}]"
                    ),
                    stacklevel=1,  # one place, so the default filter shows it once per process
                )
            return
        try:
            raw = read_toml(registry_file)
            registry = RegistryFile.model_validate(raw)
        except TomlSyntaxError as exc:
            self.problems.append(toml_problem(exc))
            return
        except ValidationError as exc:
            self.problems += [model_problem(registry_file, RegistryFile, err, raw) for err in exc.errors()]
            return
        self._registered[tasks_dir] = registered
        for name, entry in registry.tasks.items():
            location = TaskLocation(
                name=name, dir=tasks_dir / (entry.path or name), registry_file=registry_file, builtin=builtin
            )
            registered.add(location.dir.resolve())
            if name in self.locations:
                self.shadowed[name] = self.locations[name]
            self.locations[name] = location
        self._note_unregistered(tasks_dir, registered, builtin=builtin)

    def _note_unregistered(self, tasks_dir: Path, registered: set[Path], *, builtin: bool) -> list[str]:
        """Record (and return the names of) the task folders of a user directory no entry points at."""
        if builtin:
            return []
        folders = [
            Path(p.file) for p in unregistered_folders(tasks_dir, registered, tasks_dir / REGISTRY_FILE)
        ]
        self.unregistered.update({folder.name: folder for folder in folders})
        return [folder.name for folder in folders]


def _holds_tasks(tasks_dir: Path) -> bool:
    """Whether a directory holds a registry or a folder that looks like a task."""
    if (tasks_dir / REGISTRY_FILE).is_file():
        return True
    return tasks_dir.is_dir() and bool(unregistered_folders(tasks_dir, set(), tasks_dir / REGISTRY_FILE))


def validate(registry_or_dirs: TaskRegistry | Sequence[Path], name: str | None = None) -> list[Problem]:
    """Every problem of one task (`name`) or of every task and tasks directory, all at once.

    Args:
        registry_or_dirs: a registry, or the tasks directories to build one from (later ones win).
        name: validate only this task (registry-level problems of its directory included).

    Raises:
        TaskNotFoundError: `name` is given but not registered.
    """
    registry = (
        registry_or_dirs
        if isinstance(registry_or_dirs, TaskRegistry)
        else TaskRegistry(list(registry_or_dirs))
    )
    if name is not None:
        location = registry.location(name)
        registry_problems = [
            p for p in registry.problems if Path(p.file).parent == location.registry_file.parent
        ]
        return registry_problems + task_problems(location)
    problems = list(registry.problems)
    for tasks_dir, registered in registry._registered.items():
        problems += unregistered_folders(tasks_dir, registered, tasks_dir / REGISTRY_FILE)
    for task_name in registry.names():
        problems += task_problems(registry.locations[task_name])
    return problems
