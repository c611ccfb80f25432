"""What a run delivers: the workspace as its checks saw it, nothing a role wrote besides; and its report.

A check runs over a sealed snapshot of the files its manifest admits (the outputs, the task's files, the
declared evidence, a write a person approved); whatever else a role wrote is left out of it. When the run
ends, whatever its outcome, the workspace a user takes is made the same: every file a role wrote that
the final manifest does not admit is moved out of the workspace into the run folder's `left-out/` (kept
for a person to read, never delivered) and listed in the trace (`trace.delivery`). So a file no check saw
cannot change what `import <output>` gives a user: a package beside the module, a vendored copy, stale
bytecode.

On a repository run the commit is built from the same manifest: a new file no check saw is moved out
like any other, and a tracked file whose change no check saw (check configuration a role changed) stays
as the repository has it; its change is never committed (`left_out_paths`).

The run's report (`report.md`, the task's `[report]`) is taken when the run ends, before its trace is
written the last time (`write_report`).
"""

from __future__ import annotations

import os
from pathlib import Path

from pse._causal import causal_line
from pse.events import DeliveryRecord, LeftOutFile
from pse.roles import ROLE_SPECS
from pse.runner._report_sections import report_sections
from pse.tasks import Task, extract_report, titled_report
from pse.toolagent import ToolExecutor
from pse.trace import Trace

__all__ = ["LEFT_OUT_DIR", "deliver", "left_out_paths", "write_report"]

LEFT_OUT_DIR = "left-out"
"""The run folder's folder of the files a role wrote that no check saw."""


def deliver(executor: ToolExecutor, run_dir: Path) -> DeliveryRecord:
    """Make the workspace the final manifest's: move out every role-written file it does not admit."""
    manifest = executor.manifest(evaluation=False)
    admitted = set(manifest.area("workspace"))
    repository = executor.evidence.repository
    tracked = repository.tracked if repository is not None else frozenset()
    workspace = executor.workspace
    left: list[LeftOutFile] = []
    problems: list[str] = []
    for path, who in sorted(executor.provenance.written_by_roles("workspace").items()):
        source = workspace / path
        if path in admitted or not os.path.lexists(source) or _inside_admitted(path, admitted):
            continue
        if path in tracked:  # the repository's file: it stays, its change is not delivered
            left.append(LeftOutFile(path=path, author=who))
            continue
        target = run_dir / LEFT_OUT_DIR / path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        _drop_empty_parents(source.parent, workspace)
        left.append(LeftOutFile(path=path, author=who, kept_at=str(target.relative_to(run_dir))))
    note = f"could not move out: {'; '.join(problems[:5])}" if problems else ""
    return DeliveryRecord(files=len(admitted), left_out=left, note=note)


def left_out_paths(delivery: DeliveryRecord | None) -> set[str]:
    """The paths a delivery left out (a repository run's commit leaves their changes out too)."""
    return {f.path for f in delivery.left_out} if delivery is not None else set()


def _inside_admitted(path: str, admitted: set[str]) -> bool:
    """A folder a role made that holds admitted files (a folder output): the files speak for it."""
    prefix = path.rstrip("/") + "/"
    return any(a.startswith(prefix) for a in admitted)


def _drop_empty_parents(folder: Path, workspace: Path) -> None:
    """Remove the folders a move emptied, up to the workspace (an empty folder named like a module is
    still something `import` looks at)."""
    root = workspace.resolve()
    while folder.resolve() != root and root in folder.resolve().parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def write_report(task: Task, workspace: Path, run_dir: Path, trace: Trace) -> None:
    """Take the run's report (the task's `[report]`: a workspace file, or the worker's last report) into
    `report.md`, and note its path in `trace.report`."""
    workers = {name for name, spec in ROLE_SPECS.items() if spec.final == "report"}
    said = (m.content for c in reversed(trace.cycles) for m in reversed(c.messages) if m.source in workers)
    report = extract_report(task, workspace, next(said, None))
    spec = task.config.report
    if report is None:
        return
    if spec is not None and spec.file is None:  # the Specialist's words: say whose
        report = titled_report(
            report,
            task=task.name,
            run_id=trace.run_id,
            outcome=trace.outcome or trace.state,
            reason=trace.outcome_reason,
            why=causal_line(trace),
            sections=report_sections(trace, workspace, task.config.expected_outputs),
        )
    path = run_dir / "report.md"
    path.write_text(report, encoding="utf-8")
    trace.report = str(path)
