"""Who wrote what: the ToolAgent sees every write, so it can say who authored each file a check reads.

Every file of the workspace or the evaluation area is the task's (seeded) until a role writes it through
the ToolAgent: `write_file`, or a read-write command whose changes PSE kept. The map is rebuilt from the
audit records when a run resumes, so it covers the whole run, not one process.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from pse.events import ToolCallRecord
from pse.sandbox import Accept
from pse.tools import Tool, check_config_reason

__all__ = ["TASK_AUTHOR", "Provenance", "check_config_guard"]

TASK_AUTHOR = "task"
"""The author of every file nobody wrote through the ToolAgent: the task seeded it."""


def _key(area: str, path: str) -> tuple[str, str]:
    return area, str(PurePosixPath(path.strip()))


class Provenance:
    """Authors of files, by (area, path): the last role that wrote each one."""

    def __init__(self, records: Iterable[ToolCallRecord] = ()) -> None:
        self._authors: dict[tuple[str, str], str] = {}
        for record in records:
            self.note(record)

    def note(self, record: ToolCallRecord) -> None:
        """File what an audit record wrote (nothing, for a denied call or a read)."""
        if record.decision != "allowed" or record.status not in ("ok", "error", "timeout"):
            return
        facts = record.facts
        if record.tool == Tool.WRITE_FILE and record.status == "ok" and "path" in facts:
            self._authors[_key(str(facts.get("area", "workspace")), str(facts["path"]))] = record.requester
        for path in facts.get("wrote", []):
            self._authors[_key("workspace", str(path))] = record.requester

    def author(self, area: str, path: str) -> str:
        """Who wrote `path` last: a role's name, or `task`."""
        return self._authors.get(_key(area, path), TASK_AUTHOR)

    def written_by_roles(self, area: str = "workspace") -> dict[str, str]:
        """path → author of every file of `area` a role wrote."""
        return {path: who for (a, path), who in sorted(self._authors.items()) if a == area}


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
