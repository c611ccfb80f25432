"""The verification manifest: which files are evidence for a check, decided by PSE, never by the files.

At every check PSE lists the files a check may see, from the task, the plan and its own write records:

* **outputs**: the plan's `<output>`s and the task's `expected_outputs` (a folder output: every file
  under it), whoever wrote them;
* **tests**: test files (`test_*.py`, `*_test.py`) among the outputs and the inputs, and every file of the
  Evaluator's evaluation area;
* **inputs**: every file no role wrote (the task seeded it: its data, its visible tests);
* **config**: the check-configuration files the task declares (`[verification] check_config_files`);
  no other one, whoever wrote it, not even one the task seeded (it would steer the check);
* **evidence**: role-written files matching the task's `[verification] evidence` globs, and those whose
  last write a person approved (a call an approval rule held).

Everything else a role wrote is **left out**: absent from the check's snapshot, and named to the
Evaluator with its author. Bytecode (`__pycache__`, `*.pyc`) and VCS folders are never evidence.

On a repository run (`--repo`), the repository's files at the base ref are inputs no role wrote: each
is admitted (its own check configuration too, as `config`: the repository's `conftest.py` and pytest
settings, while no role has changed them), and a tracked file a role changed is admitted as the run's
`output`. The tracked files matching the task's protected globs (`RepositoryFiles`; default: the test
files and test configuration pytest would discover) may not be changed by a role at all.

A check also owes **positive evidence** for its Python outputs: each declared `.py` output (a folder
output: at least one module in it) must have been imported from its own path and had lines executed
while the tests ran (`CoverageRule`).
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib.machinery
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pse._run_files import read_beneath, regular_files_beneath
from pse.tools._protected import check_config_reason

__all__ = [
    "EVIDENCE_LIMIT",
    "PROTECTED_BY_DEFAULT",
    "CoverageRule",
    "EvidenceFile",
    "EvidenceRules",
    "Manifest",
    "RepositoryFiles",
    "build_manifest",
    "is_test_file",
    "protecting_glob",
    "test_side",
]

EVIDENCE_LIMIT = 20_000
"""Most files of an area one manifest lists; beyond it, files are neither evidence nor listed."""
_NEVER = frozenset({"__pycache__", ".git", ".hg", ".svn", ".pytest_cache", ".ruff_cache", ".mypy_cache"})
_MAX_DEPTH = 40
TASK_AUTHOR = "task"


PROTECTED_BY_DEFAULT = (
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "tests/*",
    "test/*",
    "*/tests/*",
    "*/test/*",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
)
"""A repository's files no role may change unless the task says otherwise: the test files pytest collects
(`test_*.py`, `*_test.py` at any depth), everything under a `tests/` or `test/` folder (their data and
fixtures), every `conftest.py`, and the files pytest reads its configuration from."""


def protecting_glob(path: str, globs: Iterable[str]) -> str | None:
    """The first glob that matches `path`: a glob without `/` matches the file's name at any depth, one
    with `/` the whole path (fnmatch: `*` also crosses folders)."""
    name = PurePosixPath(path).name
    for glob in globs:
        if fnmatch.fnmatchcase(path if "/" in glob else name, glob):
            return glob
    return None


@dataclass(frozen=True, slots=True)
class RepositoryFiles:
    """A repository run's files at the base ref: `tracked` are inputs no role wrote; `protected` (path →
    the glob that protects it) may not be changed by a role."""

    tracked: frozenset[str]
    protected: dict[str, str] = field(default_factory=dict)
    tests_at_base: dict[str, bytes] = field(default_factory=dict)
    """The repository's test files at the base ref (path → bytes): when a task lets roles change them,
    each check tells the Evaluator which changed, with the diff of each."""

    @classmethod
    def of(
        cls,
        tracked: Iterable[str],
        globs: Iterable[str] = PROTECTED_BY_DEFAULT,
        tests_at_base: dict[str, bytes] | None = None,
    ) -> RepositoryFiles:
        paths, patterns = frozenset(tracked), tuple(globs)
        found = {p: g for p in sorted(paths) if (g := protecting_glob(p, patterns)) is not None}
        return cls(paths, found, dict(tests_at_base or {}))


def is_test_file(path: str) -> bool:
    """pytest's default test-file names: `test_*.py` and `*_test.py`."""
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def test_side(path: str) -> bool:
    """A file of the tests' side, imported by the checking process when its author's session runs: a
    test file, a `conftest.py`, or anything under a `tests` or `test` folder."""
    parts = PurePosixPath(path).parts
    in_tests = any(p in ("tests", "test") for p in parts[:-1])
    return is_test_file(path) or parts[-1:] == ("conftest.py",) or in_tests


@dataclass(frozen=True, slots=True)
class EvidenceFile:
    """One admitted file: its path (`@evaluation/…` for the evaluation area), kind and author."""

    path: str
    kind: str
    author: str

    @property
    def area(self) -> str:
        return "evaluation" if self.path.startswith("@evaluation/") else "workspace"

    @property
    def relative(self) -> str:
        """The path inside its area."""
        return self.path.removeprefix("@evaluation/")


@dataclass(frozen=True, slots=True)
class CoverageRule:
    """A declared Python output the tests must execute: `path` itself, or any module of a folder output."""

    output: str
    modules: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EvidenceRules:
    """What the task declares about evidence (the plan's outputs are read at each check)."""

    expected_outputs: tuple[str, ...] = ()
    check_config: frozenset[str] = frozenset()
    evidence: tuple[str, ...] = ()
    plan_outputs: Callable[[], Sequence[str]] = field(default=lambda: ())
    repository: RepositoryFiles | None = None
    """A repository run's files at the base ref (None: not a repository run)."""
    approved: Callable[[], Sequence[str]] = field(default=lambda: ())
    """Role-written paths whose last write a person approved (an approval rule held it): declared by the
    person, so evidence like a declared output's neighbour, checked and delivered."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """The files a check may see, those left out (path, author), and what its tests must execute."""

    files: tuple[EvidenceFile, ...]
    left_out: tuple[tuple[str, str], ...] = ()
    coverage: tuple[CoverageRule, ...] = ()
    changed_tests: tuple[tuple[str, str, str], ...] = ()
    """A repository run's tests a role changed: (path, author, unified diff from the base ref)."""

    def area(self, name: str) -> dict[str, EvidenceFile]:
        """The admitted files of one area, by their path inside it."""
        return {f.relative: f for f in self.files if f.area == name}

    def tests(self, area: str) -> list[str]:
        """The admitted test files of one area (paths inside it), sorted."""
        return sorted(f.relative for f in self.files if f.area == area and f.kind == "test")

    def author(self, path: str) -> str:
        """Who wrote an admitted file (`unknown` for a path the manifest does not hold)."""
        for f in self.files:
            if f.path == path:
                return f.author
        return "unknown"

    def shadows(self) -> list[tuple[str, str, str]]:
        """(declared Python output, its module, what `import` gives instead) for each output another file
        of the snapshot, or the interpreter itself, stands in for in a plain run from the workspace:
        Python's import order puts a package and an extension module before a source file of the same
        name, and a module before a folder without `__init__.py`."""
        files = set(self.area("workspace"))
        found = []
        for path in sorted({m for rule in self.coverage for m in rule.modules}):
            parts = PurePosixPath(path).with_suffix("").parts
            if not parts or not all(part.isidentifier() for part in parts):
                continue  # not importable by name: nothing stands in for it
            shadow = _shadow(parts, files)
            if shadow is not None:
                found.append((path, ".".join(parts), shadow))
        return found

    def describe(self) -> str:
        """Two lines for the Evaluator: what the check saw, and what it did not."""
        kinds: dict[str, list[str]] = {}
        for f in self.files:
            kinds.setdefault(f.kind, []).append(f.path)
        parts = []
        for kind in ("output", "test", "input", "config", "evidence"):
            paths = kinds.get(kind, [])
            if paths:
                shown = ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")
                parts.append(f"{kind}s: {shown}")
        text = f"[evidence] this check ran over a sealed snapshot of {len(self.files)} file(s)"
        text += f" ({'; '.join(parts)})" if parts else ""
        if self.left_out:
            gone = ", ".join(f"{path} ({who})" for path, who in self.left_out[:12])
            more = f" and {len(self.left_out) - 12} more" if len(self.left_out) > 12 else ""
            text += (
                f"\n[evidence] left out, written by a role but not declared as an output or evidence: "
                f"{gone}{more}"
            )
        if self.changed_tests:
            shown = ", ".join(f"{path} ({who})" for path, who, _ in self.changed_tests)
            diffs = "".join(diff for _, _, diff in self.changed_tests)
            cut = diffs[:_DIFF_CHARS] + ("\n… (diff cut)\n" if len(diffs) > _DIFF_CHARS else "")
            text += (
                f"\n[evidence] the repository's tests changed by a role (the task lets roles change them): "
                f"{shown}; judge whether each change is right, not only whether it passes:\n{cut.rstrip()}"
            )
        return text + "\n"


def _shadow(parts: tuple[str, ...], files: set[str]) -> str | None:
    """What a plain `import` of the module at `parts` (from the workspace's root) gives instead of it."""
    if parts[0] in sys.builtin_module_names or importlib.machinery.FrozenImporter.find_spec(parts[0]):
        return f"the interpreter's own {parts[0]} module"
    for depth in range(len(parts)):
        prefix = "/".join(parts[: depth + 1])
        package = next((f"{prefix}/{init}" for init in _INITS if f"{prefix}/{init}" in files), None)
        extension = next(
            (prefix + s for s in importlib.machinery.EXTENSION_SUFFIXES if prefix + s in files), None
        )
        if depth == len(parts) - 1:
            return package or extension
        if package is None and (extension or f"{prefix}.py" in files):
            return extension or f"{prefix}.py"  # a module hides a folder without __init__.py
    return None


_INITS = ("__init__.py", *(f"__init__{s}" for s in importlib.machinery.EXTENSION_SUFFIXES))


def _declared(path: str, outputs: Iterable[str]) -> bool:
    return any(path == o or path.startswith(o.rstrip("/") + "/") for o in outputs if o not in ("", "."))


def candidate_files(root: Path | None) -> list[str]:
    """The files under `root` a manifest considers (regular, reached through no link, at most
    `EVIDENCE_LIMIT`, none in a VCS or cache folder): every file that can be evidence is one of them."""
    if root is None or not root.is_dir():
        return []
    found = regular_files_beneath(
        root, [], max_files=EVIDENCE_LIMIT, max_depth=_MAX_DEPTH, skip_dir=lambda name: name in _NEVER
    )
    return [path for path, _ in found if not path.endswith((".pyc", ".pyo"))]


def build_manifest(
    workspace: Path,
    evaluation: Path | None,
    rules: EvidenceRules,
    author: Callable[[str, str], str],
) -> Manifest:
    """The manifest of one check, from the live folders, the rules and who wrote each file.

    Args:
        workspace: the run workspace.
        evaluation: the Evaluator's evaluation area, when the check's grant reaches it.
        rules: what the task declares.
        author: (area, path) → who wrote it (`task` when no role did).
    """
    outputs = [str(PurePosixPath(p.strip())) for p in (*rules.expected_outputs, *rules.plan_outputs())]
    files: list[EvidenceFile] = []
    left_out: list[tuple[str, str]] = []
    tracked = rules.repository.tracked if rules.repository is not None else frozenset()
    approved = frozenset(rules.approved())
    for path in candidate_files(workspace):
        if ".git" in PurePosixPath(path).parts:
            continue  # a `.git` file is a pointer into a repository, never evidence
        who = author("workspace", path)
        if check_config_reason(path) is not None:
            if path in rules.check_config or (path in tracked and who == TASK_AUTHOR):
                files.append(EvidenceFile(path, "config", who))
            elif who != TASK_AUTHOR:
                left_out.append((path, who))
            continue
        test = is_test_file(path)
        if _declared(path, outputs):
            files.append(EvidenceFile(path, "test" if test else "output", who))
        elif who == TASK_AUTHOR:
            files.append(EvidenceFile(path, "test" if test else "input", who))
        elif path in tracked:  # the repository's file, changed by a role: the run's change
            files.append(EvidenceFile(path, "test" if test else "output", who))
        elif path in approved or any(fnmatch.fnmatchcase(path, pattern) for pattern in rules.evidence):
            files.append(EvidenceFile(path, "test" if test else "evidence", who))
        else:
            left_out.append((path, who))
    for path in candidate_files(evaluation):
        if check_config_reason(path) is not None:
            continue
        kind = "test" if is_test_file(path) else "evidence"
        files.append(EvidenceFile(f"@evaluation/{path}", kind, author("evaluation", path)))
    changed = _changed_tests(workspace, rules.repository, files)
    admitted = {f.path for f in files if f.area == "workspace"}
    coverage = []
    for output in dict.fromkeys(outputs):
        if output.endswith(".py") and not is_test_file(output) and check_config_reason(output) is None:
            coverage.append(CoverageRule(output, (output,)))
        elif not output.endswith(".py"):
            modules = tuple(
                p for p in sorted(admitted)
                if _declared(p, [output]) and p.endswith(".py") and not is_test_file(p)
            )  # fmt: skip
            if modules:
                coverage.append(CoverageRule(output, modules))
    return Manifest(tuple(files), tuple(left_out), tuple(coverage), changed)


_DIFF_CHARS = 6000
"""Most characters of the changed tests' diffs one check's output shows."""


def _changed_tests(
    workspace: Path, repository: RepositoryFiles | None, files: Sequence[EvidenceFile]
) -> tuple[tuple[str, str, str], ...]:
    """The repository's tests a role changed, each with its diff from the base ref."""
    if repository is None or not repository.tests_at_base:
        return ()
    found = []
    for f in files:
        base = repository.tests_at_base.get(f.path)
        if f.area != "workspace" or f.author == TASK_AUTHOR or base is None:
            continue
        try:
            now = read_beneath(workspace, list(PurePosixPath(f.path).parts), max_bytes=1_000_000)
        except OSError:
            continue
        lines = difflib.unified_diff(
            base.decode("utf-8", "replace").splitlines(keepends=True),
            now.decode("utf-8", "replace").splitlines(keepends=True),
            fromfile=f"a/{f.path}",
            tofile=f"b/{f.path}",
        )
        found.append((f.path, f.author, "".join(lines)))
    return tuple(found)
