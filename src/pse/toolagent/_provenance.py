"""Who wrote what: the ToolAgent sees every write, so it can say who authored each file a check reads.

Every file of the workspace or the evaluation area is the task's (seeded) until a role writes it through
the ToolAgent: `write_file`, or a read-write command whose changes PSE kept. The map is rebuilt from the
audit records when a run resumes, so it covers the whole run, not one process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from pse.events import ToolCallRecord
from pse.sandbox import Accept
from pse.tools import RepositoryFiles, Tool, check_config_reason

__all__ = [
    "INPUT_REASON",
    "TASK_AUTHOR",
    "TESTS_REASON",
    "TESTS_RULE",
    "VCS_REASON",
    "VCS_RULE",
    "Provenance",
    "check_config_guard",
    "evidence_guard",
]

INPUT_REASON = "it is one of the task's own files"
"""How a refusal to change a task's file starts (the decider names its rule, `protect.input`, by it)."""
TESTS_REASON = "it is one of the repository's tests"
"""How a refusal to change a protected file of a repository run starts (rule `protect.tests`)."""
VCS_REASON = "git's own files are PSE's"
"""How a refusal to write a `.git` path of a repository run starts (rule `protect.vcs`)."""
TESTS_RULE = "protect.tests"
"""The rule that denies changing a repository's protected file (its tests and test configuration)."""
VCS_RULE = "protect.vcs"
"""The rule that denies writing a `.git` path on a repository run."""

TASK_AUTHOR = "task"
"""The author of every file nobody wrote through the ToolAgent: the task seeded it."""


def _key(area: str, path: str) -> tuple[str, str]:
    return area, str(PurePosixPath(path.strip()))


class Provenance:
    """Authors of files, by (area, path): the last role that wrote each one, and whether a person
    approved that write (a call an approval rule held)."""

    def __init__(self, records: Iterable[ToolCallRecord] = ()) -> None:
        self._authors: dict[tuple[str, str], str] = {}
        self._approved: set[tuple[str, str]] = set()
        for record in records:
            self.note(record)

    def note(self, record: ToolCallRecord) -> None:
        """File what an audit record wrote (nothing, for a denied call or a read)."""
        if record.decision != "allowed" or record.status not in ("ok", "error", "timeout"):
            return
        facts = record.facts
        written = [_key("workspace", str(path)) for path in facts.get("wrote", [])]
        if record.tool == Tool.WRITE_FILE and record.status == "ok" and "path" in facts:
            written.append(_key(str(facts.get("area", "workspace")), str(facts["path"])))
        for key in written:
            self._authors[key] = record.requester
            if record.approval is not None:
                self._approved.add(key)
            else:
                self._approved.discard(key)

    def approved(self, area: str = "workspace") -> list[str]:
        """The files of `area` whose last write a person approved: the person declared them."""
        return sorted(path for a, path in self._approved if a == area)

    def author(self, area: str, path: str) -> str:
        """Who wrote `path` last: a role's name, or `task`."""
        return self._authors.get(_key(area, path), TASK_AUTHOR)

    def written_by_roles(self, area: str = "workspace") -> dict[str, str]:
        """path → author of every file of `area` a role wrote."""
        return {path: who for (a, path), who in sorted(self._authors.items()) if a == area}


def evidence_guard(
    declared: frozenset[str],
    outputs: Iterable[str],
    provenance: Provenance,
    workspace: Path,
    repository: RepositoryFiles | None = None,
) -> Accept:
    """The rule for every change a role makes to the workspace: check-configuration files only where the
    task declares them, and no change to the task's own files (its inputs, its visible tests: the evidence
    the work is judged on) unless the task lists them in `expected_outputs`.

    On a repository run, the repository's files at the base ref are the work's material, not the task's
    files: a role may change them, except the protected ones (its tests and test configuration,
    `protect.tests`) and any `.git` path (`protect.vcs`), whatever the workspace holds."""
    config = check_config_guard(declared)
    allowed = frozenset(str(PurePosixPath(p.strip())) for p in outputs)

    def repository_reason(normal: str) -> str | None:
        if repository is None:
            return None
        if any(part.lower() == ".git" for part in PurePosixPath(normal).parts):
            return (
                f"{VCS_REASON}: PSE alone commits the run's change, and no role writes into git's files "
                f"(policy: {VCS_RULE})"
            )
        glob = repository.protected.get(normal)
        if glob is not None:
            return (
                f"{TESTS_REASON} at the base ref (protected by {glob!r}): the evidence the change is judged "
                "on may not be changed by a role; a task whose roles must change it narrows "
                f"[repository] protected of task.toml (policy: {TESTS_RULE})"
            )
        return None

    def seeded(path: str) -> str | None:
        """A file under `path` the task put there and no role wrote since, if any."""
        target = workspace / path
        if target.is_symlink() or target.is_file():
            return path if provenance.author("workspace", path) == TASK_AUTHOR else None
        if not target.is_dir():
            return None
        for folder, dirs, files in os.walk(target):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for name in files:
                rel = (Path(folder) / name).relative_to(workspace).as_posix()
                if provenance.author("workspace", rel) == TASK_AUTHOR:
                    return rel
        return None

    def accept(path: str) -> str | None:
        normal = str(PurePosixPath(path.strip()))
        reason = repository_reason(normal) or config(path)
        if reason is not None:
            return reason
        if normal in allowed or (repository is not None and normal in repository.tracked):
            return None
        found = seeded(normal)
        if found is None:
            return None
        return (
            f"{INPUT_REASON} ({found}): the evidence the work is judged on may not be changed by a role; "
            "a task whose roles must change it lists it in expected_outputs "
            f'(e.g. expected_outputs = ["{normal}"])'
        )

    return accept


def check_config_guard(declared: frozenset[str]) -> Accept:
    """The rule for every write a role makes: check-configuration files only where the task declares them."""

    def accept(path: str) -> str | None:
        normal = str(PurePosixPath(path.strip()))
        reason = check_config_reason(normal)
        if reason is None or normal in declared:
            return None
        return (
            f"{reason}; roles may not write it unless the task declares it in "
            f'[verification] check_config_files of task.toml (e.g. check_config_files = ["{normal}"])'
        )

    return accept
