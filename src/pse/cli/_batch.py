"""`pse batch TASK --inputs FILE`: one run per input row, with a progress bar; resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pse.batch import BatchProgress, BatchRun, BatchSummary, LocalExecutor, RayExecutor, read_rows, run_batch
from pse.batch._batch import Executor, check_concurrency, source_of
from pse.cli._common import RunsDir, TasksDir, command_settings, err, out, run_interruptible, shown
from pse.exceptions import UserError
from pse.runner import registry_for

__all__ = ["batch_cmd"]


def batch_cmd(
    task: Annotated[str, typer.Argument(help="The task every row runs.")],
    inputs: Annotated[
        Path, typer.Option("--inputs", help="FILE.jsonl (an object of inputs a line) or FILE.csv (a header).")
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Runs at once (per Ray worker with ray).")
    ] = 4,
    tag: Annotated[
        str | None,
        typer.Option("--tag", help="Name the batch (its id); default: the task and a digest of the rows."),
    ] = None,
    executor: Annotated[
        Literal["local", "ray"], typer.Option("--executor", help="local (this process) or ray.")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            "--address", help="Ray cluster to join (auto: the local `ray start`); default: a new one."
        ),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Ray workers to start (--executor ray).")] = 2,
    lease_s: Annotated[
        float, typer.Option("--lease-s", help="How long a worker's hold on a row lasts without renewal.")
    ] = 60.0,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON at the end.")] = False,
    repo: Annotated[
        Path | None,
        typer.Option("--repo", help="Work on this git repository: a worktree and branch per row."),
    ] = None,
    base: Annotated[
        str | None, typer.Option("--base", help="The ref each row's worktree starts from (default HEAD).")
    ] = None,
) -> None:
    """Run TASK once per row of an inputs file. Run the same command again to resume: rows that are done
    are skipped, interrupted runs go on from their last cycle."""
    settings = command_settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    check_concurrency(concurrency)
    if lease_s < 3:
        raise UserError("--lease-s must be at least 3 seconds")
    if address is not None and executor != "ray":
        raise UserError("--address is for --executor ray")
    chosen = registry_for(settings).get(task)
    rows = read_rows(inputs, chosen)
    runner: Executor = (
        RayExecutor(workers=workers, per_worker=concurrency, address=address)
        if executor == "ray"
        else LocalExecutor(concurrency)
    )
    bar = _Bar(len(rows), enabled=not as_json)
    plan = BatchRun(
        task=chosen,
        rows=rows,
        settings=settings,
        executor=runner,
        source=source_of(inputs),
        tag=tag,
        lease_s=lease_s,
        on_progress=bar.update,
        repo=repo,
        base=base,
    )

    with bar:
        summary = run_interruptible(run_batch(plan), plan.cancel)  # Ctrl-C: runs resume next time
    if as_json:
        print(summary.model_dump_json(indent=1))
    else:
        _print(summary)
    if summary.interrupted:
        err.print(
            f"interrupted: run the same command again (batch {summary.batch_id}) to go on", highlight=False
        )
        raise typer.Exit(130)
    if summary.errors:
        raise typer.Exit(3)
    raise typer.Exit(0 if summary.outcomes.get("PASSED", 0) == summary.rows else 1)


class _Bar:
    def __init__(self, total: int, *, enabled: bool) -> None:
        self.live = enabled and err.is_terminal
        self.bar = Progress(
            TextColumn("batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            console=err,
            disable=not self.live,
        )
        self.task = self.bar.add_task("batch", total=total, figures="")

    def __enter__(self) -> _Bar:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def update(self, p: BatchProgress) -> None:
        outcomes = " ".join(f"{k}:{v}" for k, v in sorted(p.outcomes.items()))
        figures = (
            f"running {p.running} · failed {p.failed} · {outcomes or '…'} · {p.tokens:,} tok · "
            f"{p.cost:.4f} {p.currency}"
        )
        self.bar.update(self.task, completed=p.done, figures=figures)


def _print(s: BatchSummary) -> None:
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(s.outcomes.items())) or "none yet"
    out.print(
        f"batch {shown(s.batch_id)} ({shown(s.task)}, {s.executor}): {s.done}/{s.rows} done, {outcomes}; "
        f"{s.skipped} skipped (done before), {s.resumed} resumed; {s.tokens:,} tokens, "
        f"{s.cost:.4f} {shown(s.currency)}; {s.wall_s:.1f} s",
        highlight=False,
    )
    for branch in s.branches:
        out.print(f"branch: {shown(branch)}", highlight=False)
    for error in s.errors[:10]:
        err.print(f"[red]✗[/] {shown(error)}", highlight=False)
    out.print("[dim]runs: pse trace list · the batch's rows: pse store info · again: same command[/]")
