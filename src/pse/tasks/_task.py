"""One task: its folder, its typed config, its prompts, and how it seeds a run workspace."""

from __future__ import annotations

import copy
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict

from pse._suggest import did_you_mean
from pse.config import ProtocolMode
from pse.exceptions import ConfigError, UserError
from pse.roles import ROLES, role_spec
from pse.tasks._base_prompts import base_prompt, protocol_prompt
from pse.tasks._config import REPOSITORY_CHECK, TaskConfig
from pse.tasks._message import opening_message
from pse.tasks._rules import run_rules
from pse.tasks._toml import read_toml
from pse.tools import check_config_reason, declared_config

__all__ = [
    "INPUTS_DIR",
    "Problem",
    "Task",
    "TaskLocation",
    "is_input_file",
    "read_toml",
    "role_file",
]

TASK_FILE = "task.toml"
RULES_FILE = "rules.toml"
DEFAULT_CASSETTE = "cassette.json"
RULES_SUMMARY_FILES = ("rules_summary.json", "rules_summary.md")
INPUTS_DIR = "inputs"
"""Where `seed_workspace` writes each input as a raw text file, `inputs/NAME` (for checks and scripts)."""


class Problem(BaseModel):
    """One thing `validate` found wrong: where, what, and how to fix it."""

    model_config = ConfigDict(frozen=True)

    file: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}\n    fix: {self.fix}"


@dataclass(frozen=True)
class TaskLocation:
    """Where a registry says a task lives (the folder may not exist: `validate` reports that)."""

    name: str
    dir: Path
    registry_file: Path
    builtin: bool


def role_file(role: str) -> str:
    """The prompt file name of a role (`Planner` -> `planner.md`)."""
    canonical = {r.lower(): r for r in ROLES}.get(role.lower())
    if canonical is None:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    return f"{canonical.lower()}.md"


def is_input_file(path: str) -> bool:
    """Whether a workspace path is one of the inputs' files (`inputs/NAME`)."""
    return path.startswith(f"{INPUTS_DIR}/") and "/" not in path[len(INPUTS_DIR) + 1 :]


class Task:
    """A loaded, valid task. Build one through `TaskRegistry.get`, which validates it first, or in memory
    (`pse.testing`): a name, a config and the roles' prompts, no folder.

    Args:
        location: where the task's folder is; or, for a task in memory, only its name.
        config: the task's config (`task.toml`'s, or one built in memory).
        prompts: a task in memory's own prompt per role (a role without one gets its base prompt only).

    Raises:
        UserError: a task in memory whose config needs a folder (a seed, a cassette, `{task_dir}`).
    """

    def __init__(
        self, location: TaskLocation | str, config: TaskConfig, prompts: Mapping[str, str] | None = None
    ) -> None:
        folder = None if isinstance(location, str) else location
        self.name = location if isinstance(location, str) else location.name
        self.folder: Path | None = folder.dir if folder is not None else None
        """The task's folder (None: a task in memory)."""
        self.builtin = folder is not None and folder.builtin
        self.config = config
        self.prompts = dict(prompts or {})
        if folder is None:
            _check_in_memory(self.name, config, self.prompts)

    def __repr__(self) -> str:
        return f"Task(name={self.name!r}, dir={str(self.folder)!r})"

    # --- files ------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        """The task's folder (a registry's task has one; a task in memory raises: read `folder`)."""
        if self.folder is None:
            raise UserError(f"task {self.name!r} is in memory: it has no folder")
        return self.folder

    @property
    def cassette_path(self) -> Path | None:
        """The default cassette: the configured one, else `cassette.json` when present, else None."""
        if self.folder is None:
            return None
        if self.config.cassette is not None:
            return self.dir / self.config.cassette
        default = self.dir / DEFAULT_CASSETTE
        return default if default.is_file() else None

    @property
    def rules_path(self) -> Path | None:
        """The task's `rules.toml`, or None when it has no rules."""
        if self.folder is None:
            return None
        path = self.dir / RULES_FILE
        return path if path.is_file() else None

    @property
    def knowledge_dir(self) -> Path | None:
        """The task's `knowledge/` folder for `search_knowledge`, or None."""
        if self.folder is None:
            return None
        path = self.dir / "knowledge"
        return path if path.is_dir() else None

    @property
    def check_config_files(self) -> frozenset[str]:
        """Check-configuration files roles may write: the declared ones, and expected outputs that are one."""
        declared = self.config.verification.check_config_files
        outputs = [p for p in self.config.expected_outputs if check_config_reason(p) is not None]
        return declared_config([*declared, *outputs])

    # --- prompts ----------------------------------------------------------------------------
    def role_prompt(self, role: str) -> str:
        """The task's own prompt for a role (`planner.md`, `specialist.md` or `evaluator.md`; in memory, the
        one given, or none)."""
        if self.folder is None:
            return self.prompts.get(role, "").strip()
        return (self.dir / role_file(role)).read_text(encoding="utf-8").strip()

    def system_prompt(self, role: str, protocol: ProtocolMode = "dsml") -> str:
        """Protocol + base role prompt + the task's role prompt (the engine appends the role's tools).

        A seat that does other roles' work (`RoleSpec.borrows`: the single team's Agent, the evaluation
        baseline) gets its own base prompt and the task's prompts of those roles, each under a heading:
        what the work needs and how it is checked, from one agent.
        """
        borrowed = role_spec(role).borrows
        own = [f"## What this task tells its {r}\n\n{self.role_prompt(r)}" for r in borrowed] or [
            self.role_prompt(role)
        ]
        return "\n\n".join(filter(None, (protocol_prompt(protocol), base_prompt(role), *own))) + "\n"

    # --- inputs and the opening message ----------------------------------------------------
    def resolve_inputs(self, inputs: dict[str, str] | None = None) -> dict[str, str]:
        """Fill defaults and reject unknown or missing inputs.

        Raises:
            UserError: an input is not declared by the task, or a required one is missing.
        """
        given = dict(inputs or {})
        declared = self.config.inputs
        unknown = sorted(set(given) - set(declared))
        if unknown and not declared:
            raise UserError(
                f"task {self.name!r} takes no inputs, and was given {', '.join(unknown)}; "
                "run it without inputs (--input)"
            )
        if unknown:
            named = [
                name + (f" ({hint})" if (hint := did_you_mean(name, declared)) else "") for name in unknown
            ]
            known = ", ".join(sorted(declared))
            raise UserError(f"task {self.name!r} has no input {', '.join(named)}; its inputs are: {known}")
        resolved: dict[str, str] = {}
        for name, spec in declared.items():
            if name in given:
                resolved[name] = given[name]
            elif spec.default is not None:
                resolved[name] = spec.default
            elif spec.required:
                raise UserError(
                    f"task {self.name!r} needs input {name!r} ({spec.description}); pass --input {name}=VALUE"
                )
        return resolved

    def for_inputs(self, inputs: Mapping[str, str]) -> Task:
        """The task as a run with these (resolved) inputs sees it: given its `[repository]
        test_command_input`, the input's command is the declared check `tests`, required in place of pytest.
        """
        name = self.config.repository.test_command_input
        command = inputs.get(name, "").strip() if name is not None else ""
        if not command:
            return self
        required = [c for c in self.config.required_checks if c != "pytest"] + [REPOSITORY_CHECK]
        config = self.config.model_copy(
            update={"checks": {**self.config.checks, REPOSITORY_CHECK: command}, "required_checks": required}
        )
        task = copy.copy(self)
        task.config = config
        return task

    def seed_listing(self) -> list[str]:
        """Workspace-relative paths `seed_workspace` will create (sorted; deterministic)."""
        files: list[str] = []
        for item in self.config.seed:  # a task in memory has none
            source = self.dir / item
            if source.is_dir():
                files += [
                    p.relative_to(self.dir).as_posix()
                    for p in source.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts
                ]
            else:
                files.append(item)
        if self.rules_path is not None:
            files += RULES_SUMMARY_FILES
        files += [f"{INPUTS_DIR}/{name}" for name in self.config.inputs]
        return sorted(set(files))

    def task_message(
        self,
        inputs: dict[str, str] | None = None,
        rules_summary: str | None = None,
        *,
        extra_files: Sequence[str] = (),
    ) -> str:
        """The run's opening message: goal, inputs, workspace files, expected outputs, checks, rules summary.

        A multi-line input (code, a document) is shown as a fenced block under its name; `extra_files`
        are workspace files written besides the seed (an evaluation instance's), listed with it. The
        inputs' files (`inputs/NAME`, for checks and scripts) are left out of the listing: the message
        shows each input itself.

        Deterministic and free of absolute paths, run ids and times, so a cassette recorded with request
        digests replays in any later run.
        """
        resolved = self.resolve_inputs(inputs)
        # The inputs' files are not listed: every input is shown in the message. A small model reads what
        # is listed and copies what it read (issue 29's HumanEval runs copied a JSON copy's escapes)
        listing = sorted({p for p in self.seed_listing() if not is_input_file(p)} | set(extra_files))
        return opening_message(self.name, self.config, resolved, listing, rules_summary)

    # --- the run workspace -----------------------------------------------------------------
    def seed_workspace(self, workspace: Path, inputs: dict[str, str] | None = None) -> list[str]:
        """Copy the seed files into `workspace`; write each input raw as `inputs/NAME` (no escaped copy: a
        small model copies what it reads) and the rules summary if present.

        Returns:
            The workspace-relative paths written, sorted.
        """
        resolved = self.resolve_inputs(inputs)
        workspace.mkdir(parents=True, exist_ok=True)
        for item in self.config.seed:
            source, target = self.dir / item, workspace / item
            if source.is_dir():
                shutil.copytree(
                    source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
                )
            elif source.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
            else:
                raise ConfigError(
                    f"{self.dir / TASK_FILE}: seed path {item!r} does not exist in the task folder"
                )
        for name, value in resolved.items():
            (workspace / INPUTS_DIR).mkdir(exist_ok=True)
            (workspace / INPUTS_DIR / name).write_text(value, encoding="utf-8")
        if self.rules_path is not None:
            run_rules(self, workspace)
        return self.seed_listing()

    def resolved_checks(self, task_dir: Path | None = None) -> dict[str, str]:
        """Declared checks with `{python}` filled in: this interpreter in isolated mode (`python -I`, so
        nothing in the workspace is on its path).

        `{task_dir}` stays for the sandbox, which fills in its private read-only copy of the task folder;
        pass `task_dir` to fill it in here instead (to run a check by hand, outside the sandbox).
        """
        python = shlex.quote(sys.executable) + " -I"
        resolved = {
            name: command.replace("{python}", python) for name, command in self.config.all_checks.items()
        }
        if task_dir is not None:
            folder = shlex.quote(str(task_dir))
            resolved = {name: command.replace("{task_dir}", folder) for name, command in resolved.items()}
        return resolved


def _check_in_memory(name: str, config: TaskConfig, prompts: Mapping[str, str]) -> None:
    """A task in memory has no folder: what its config would read from one is a mistake, said plainly."""
    needs = [
        *(["seed (give the files to the run: pse.testing's workspace_files)"] if config.seed else []),
        *(["cassette (give the turns to the run: pse.testing's turns)"] if config.cassette else []),
        *[f"checks.{k} uses {{task_dir}}" for k, v in config.checks.items() if "{task_dir}" in v],
    ]
    if needs:
        raise UserError(
            f"task {name!r} is in memory, with no folder, and its config needs one: {'; '.join(needs)}"
        )
    unknown = sorted(set(prompts) - set(ROLES))
    if unknown:
        raise UserError(
            f"task {name!r}: prompts for {', '.join(unknown)}, which is no role; give {', '.join(ROLES)}"
        )


def write_files(workspace: Path, files: Mapping[str, str]) -> list[str]:
    """Write `files` (workspace-relative path → text) into `workspace`; return their paths, sorted.

    Raises:
        UserError: a path is absolute, holds `..` or a backslash, or would go through a symlink.
    """
    written: list[str] = []
    for name, content in files.items():
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or "\\" in name or name.startswith("@"):
            raise UserError(
                f"file {name!r} must be a workspace-relative path without '..' (e.g. 'src/app.py')"
            )
        target = workspace.joinpath(*path.parts)
        for parent in [workspace.joinpath(*path.parts[:i]) for i in range(1, len(path.parts) + 1)]:
            if parent.is_symlink():
                raise UserError(f"file {name!r} would be written through a symlink in the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        written.append(path.as_posix())
    return sorted(written)
