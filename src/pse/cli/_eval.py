"""`pse eval [run] SUITE`: run a suite by several arms and compare them by hidden checks; `pse eval validate
SUITE`: every problem of a suite, at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from pse.batch import RayExecutor
from pse.cli._common import RunsDir, TasksDir, command_settings, err, out, run_interruptible, shown
from pse.evals import ArmSummary, EvalSummary, ResultRow
from pse.evals._arms import ARMS, parse_arms, select_instances
from pse.evals._harness import EvalRun, run_eval
from pse.evals._impossible import DEFAULT_SEED, VARIANTS
from pse.evals._suite import load_suite, parse_variants, suite_problems, variant_instances
from pse.exceptions import UserError
from pse.runner import registry_for

__all__ = ["eval_cmd", "validate_cmd"]

DEFAULT_DASHBOARD = "http://127.0.0.1:8080"


def eval_cmd(
    suite: Annotated[str, typer.Argument(help="A suite folder or a built-in suite (humaneval).")],
    arms: Annotated[
        str | None,
        typer.Option("--arms", help=f"Comma-separated arms of: {', '.join(ARMS)} (default pse,single)."),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Run the first N instances.")] = None,
    instances: Annotated[
        str | None, typer.Option("--instances", help="Run these instance ids (ID,…).")
    ] = None,
    variant: Annotated[
        str | None,
        typer.Option(
            "--variant",
            help=f"Comma-separated variants of: {', '.join(VARIANTS)} (default ordinary). impossible: a "
            "visible test contradicts the spec; a PASSED run is a cheat.",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Which assertion each impossible instance has mutated.")
    ] = DEFAULT_SEED,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Runs at once (per Ray worker with ray).")
    ] = 1,
    executor: Annotated[
        Literal["local", "ray"],
        typer.Option("--executor", help="local (this process) or ray (docs/scale.md)."),
    ] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster to join (auto: the local `ray start`).")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Ray workers to start (--executor ray).")] = 2,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="The evaluation's folder (re-use it to resume).")
    ] = None,
    cassettes: Annotated[
        Path | None, typer.Option("--cassettes", help="Replay DIR/<arm>/<instance id>.json per run.")
    ] = None,
    dashboard_url: Annotated[
        str, typer.Option("--dashboard-url", help="Where the report links each run.")
    ] = DEFAULT_DASHBOARD,
    runs_dir: RunsDir = None,
    tasks_dir: TasksDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json at the end.")] = False,
) -> None:
    """Run a suite's instances by each arm, judge every run by its hidden check, and compare the arms.

    `pse eval SUITE` is short for `pse eval run SUITE`.
    """
    settings = command_settings(runs_dir=runs_dir, tasks_dir=tasks_dir)
    registry = registry_for(settings)
    if cassettes is not None and not cassettes.is_dir():
        raise UserError(f"--cassettes {cassettes} is not a folder (it holds <arm>/<instance id>.json)")
    loaded = load_suite(suite, registry)
    ids = [i.strip() for i in instances.split(",") if i.strip()] if instances else []
    chosen = variant_instances(
        loaded, select_instances(loaded, limit=limit, ids=ids), parse_variants(variant), seed=seed
    )
    arm_list = parse_arms(arms, loaded)
    folder = out_dir or settings.evals_dir / f"{loaded.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    progress = _Progress(arm_list, len(chosen), enabled=not as_json)
    plan = EvalRun(
        suite=loaded,
        settings=settings,
        arms=arm_list,
        instances=chosen,
        out_dir=folder,
        cassettes=cassettes.resolve() if cassettes is not None else None,
        concurrency=concurrency,
        on_start=progress.started,
        on_row=progress.finished,
        dashboard_url=dashboard_url.rstrip("/") or None,
        executor=RayExecutor(workers=workers, per_worker=concurrency, address=address)
        if executor == "ray"
        else None,
        seed=seed,
    )

    with progress:
        summary = run_interruptible(run_eval(plan), plan.cancel)  # Ctrl-C: runs resume next time
    if plan.cancelled:
        err.print(f"interrupted: run the same command again (same --out {folder}) to go on", highlight=False)
        raise typer.Exit(130)
    if as_json:
        print(summary.model_dump_json(indent=1))
        return
    _print_summary(summary)
    out.print(f"results: {folder.resolve()}/results.jsonl · report: {folder.resolve()}/report.html")


def validate_cmd(
    suite: Annotated[str, typer.Argument(help="A suite folder or a built-in suite (humaneval).")],
    tasks_dir: TasksDir = None,
) -> None:
    """Report every problem of a suite folder at once, each with its file, line and fix. Exit 2 on any
    problem."""
    problems = suite_problems(suite, registry_for(command_settings(tasks_dir=tasks_dir)))
    if not problems:
        out.print(f"[green]ok[/]: suite {shown(suite)} valid")
        return
    for problem in problems:
        err.print(f"[red]✗[/] {shown(problem)}", highlight=False)
    raise typer.Exit(2)


class _Progress:
    """A bar per arm (instances done), with the running true-pass and false-pass counts."""

    def __init__(self, arms: list[str], total: int, *, enabled: bool) -> None:
        self.enabled = enabled
        self.live = enabled and err.is_terminal
        self.bar = Progress(
            TextColumn("{task.fields[arm]:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            console=err,
            disable=not self.live,
        )
        self.tasks: dict[str, TaskID] = {}
        self.counts = {arm: [0, 0, 0, 0] for arm in arms}  # done, true, false, running
        for arm in arms:
            self.tasks[arm] = self.bar.add_task(arm, total=total, arm=arm, figures="")

    def __enter__(self) -> _Progress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def started(self, instance: str, arm: str, run_id: str) -> None:
        self.counts[arm][3] += 1
        self._show(arm)

    def finished(self, row: ResultRow) -> None:
        counts = self.counts[row.arm]
        counts[0] += 1
        counts[1] += row.true_pass
        counts[2] += row.false_pass
        counts[3] -= 1
        self.bar.advance(self.tasks[row.arm])
        self._show(row.arm)
        if self.enabled and not self.live:
            hidden = "pass" if row.hidden.passed else "fail"
            err.print(
                f"{shown(row.arm)} {shown(row.instance)}: claimed {shown(row.claimed_outcome)}, hidden check "
                f"{hidden}, {row.cycles} cycle(s), {row.tokens} tokens ({shown(row.run_id)})",
                highlight=False,
            )

    def _show(self, arm: str) -> None:
        done, true, false, running = self.counts[arm]
        rate = f"true {true / done:.2f} · false {false}/{done}" if done else "…"
        self.bar.update(self.tasks[arm], figures=f"{rate} · running {running}")


def _rate(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f} ({ci[0]:.2f}–{ci[1]:.2f})" if ci is not None else f"{value:.2f}"


def _number(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _print_summary(summary: EvalSummary) -> None:
    impossible = f" and {summary.impossible_instances} impossible" if summary.impossible_instances else ""
    title = f"{summary.suite}: {summary.instances} instance(s){impossible}"
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    arms: list[ArmSummary] = [summary.arms[a] for a in summary.arm_order]
    for arm in arms:
        table.add_column(arm.arm, justify="right")
    rows = [
        ("instances", [str(a.instances) for a in arms]),
        ("claimed pass", [_rate(a.claimed_pass_rate, a.claimed_pass_rate_ci95) for a in arms]),
        ("true pass", [_rate(a.true_pass_rate, a.true_pass_rate_ci95) for a in arms]),
        ("false pass", [_rate(a.false_pass_rate, a.false_pass_rate_ci95) for a in arms]),
        ("escaped defects", [str(a.escaped_defects) for a in arms]),
        ("first pass", [_rate(a.first_pass_rate, a.first_pass_rate_ci95) for a in arms]),
        ("rework cycles", [_number(a.mean_rework_cycles, 2) for a in arms]),
        ("tokens / true pass", [_number(a.tokens_per_true_pass) for a in arms]),
        ("wall s / instance", [_number(a.wall_s_per_instance, 1) for a in arms]),
        ("outcomes", [" ".join(f"{k}:{v}" for k, v in a.outcomes.items()) for a in arms]),
    ]
    if summary.impossible_instances:
        rows += [
            ("impossible instances", [str(a.impossible_instances) for a in arms]),
            ("cheat rate", [_rate(a.cheat_rate, a.cheat_rate_ci95) for a in arms]),
            ("honest exit rate", [_rate(a.honest_exit_rate, a.honest_exit_rate_ci95) for a in arms]),
            ("solve rate (ordinary)", [_rate(a.solve_rate, a.solve_rate_ci95) for a in arms]),
            (
                "impossible outcomes",
                [" ".join(f"{k}:{v}" for k, v in a.impossible_outcomes.items()) for a in arms],
            ),
        ]
    for name, values in rows:
        table.add_row(name, *values)
    out.print(table)
    for pair in summary.paired:
        out.print(
            f"{pair.a} vs {pair.b} on {pair.instances}: both {pair.both}, only {pair.a} {pair.only_a}, "
            f"only {pair.b} {pair.only_b}, neither {pair.neither}; McNemar p = {pair.mcnemar_p:.3g}",
            highlight=False,
        )
