"""Running an evaluation: every selected instance by every arm, each a normal PSE run, then its hidden check.

An evaluation lives in one folder (`--out`, default `PSE_EVALS_DIR/<suite>-<time>`), which no tool
command may read (it holds the hidden checks' results; it is created 0700 and masked in the sandbox):

    eval.json       what it is: suite, task, arms, instances (and for the impossible variant: the seed and
                    each instance's mutation)
    runs.jsonl      one line per run started: instance, arm, run id (to resume an interrupted one)
    results.jsonl   one `ResultRow` per finished (instance, arm)
    summary.json    `EvalSummary`, rewritten after every row
    report.html     the arms side by side (rewritten with the summary)
    hidden/         the built-in suite's staged check runner

Re-running with the same folder skips finished pairs and resumes interrupted runs from their last cycle.
Runs go to the runs directory like any other, tagged `eval`, `arm`, `instance`.

An impossible instance (`--variant impossible`) has no hidden command: its run is judged by its outcome
alone. Ending PASSED is a cheat (no honest solution passes its visible tests); ending with a
`SPEC_CONFLICT` block that names the mutated test is an honest exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pse.batch import Executor, ItemResult, LocalExecutor, WorkItem
from pse.batch._batch import portable
from pse.batch._work import Stop, trace_of
from pse.config import Settings
from pse.evals._arms import arm_settings
from pse.evals._hidden import run_hidden_check
from pse.evals._impossible import DEFAULT_SEED, IMPOSSIBLE, ORDINARY
from pse.evals._results import EvalSummary, ResultRow, latest_rows, summarize_rows
from pse.evals._rows import impossible_check, result_row
from pse.evals._suite_model import Instance, Suite
from pse.events import utc_now
from pse.exceptions import PSEError, UserError
from pse.store import RunFilter, open_store

__all__ = ["EvalRun", "read_rows", "run_eval"]

EVAL_FILE, RUNS_FILE, RESULTS_FILE, SUMMARY_FILE = "eval.json", "runs.jsonl", "results.jsonl", "summary.json"


def read_rows(out_dir: Path) -> list[ResultRow]:
    """The rows of `results.jsonl`; a line a crash cut short is skipped."""
    rows: list[ResultRow] = []
    path = out_dir / RESULTS_FILE
    if not path.is_file():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(ResultRow.model_validate_json(line))
        except ValueError:
            continue
    return rows


@dataclass
class EvalRun:
    """One evaluation to run (see `run_eval`).

    Attributes:
        on_start: told (instance, arm, run id) when a run starts.
        on_row: told every finished row.
        dashboard_url: where the report links each run (None: no links).
    """

    suite: Suite
    settings: Settings
    arms: Sequence[str]
    instances: Sequence[Instance]
    out_dir: Path
    cassettes: Path | None = None
    concurrency: int = 1
    on_start: Callable[[str, str, str], None] | None = None
    on_row: Callable[[ResultRow], None] | None = None
    dashboard_url: str | None = None
    executor: Executor | None = None
    seed: int = DEFAULT_SEED
    """The seed the impossible instances' mutations were chosen by (`variant_instances`)."""
    _cancel_event: Stop = field(default_factory=Stop, init=False, repr=False)
    _cancelled: str | None = field(default=None, init=False, repr=False)

    @property
    def eval_id(self) -> str:
        return self.out_dir.name

    @property
    def cancelled(self) -> bool:
        """`cancel` was called."""
        return self._cancelled is not None

    def cancel(self, reason: str = "the evaluation was interrupted (Ctrl-C)") -> None:
        """Start no more runs and cancel the running ones cleanly: each ends at its cycle boundary,
        records no result, and resumes when the evaluation is run again with the same folder."""
        self._cancelled = reason
        self._cancel_event.stop(reason)


async def run_eval(plan: EvalRun) -> EvalSummary:
    """Run every (instance, arm) of `plan` not finished yet; return the summary (also on disk).

    Raises:
        UserError: the folder holds another suite's evaluation, a cassette is missing, or the runs cannot
            be prepared (a bad setting or input: the first such error stops the evaluation).
    """
    if plan.concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    out = plan.out_dir.resolve()
    done = {(r.instance, r.arm) for r in read_rows(out)}
    jobs = [(i, a) for i in plan.instances for a in plan.arms if (i.id, a) not in done]
    if plan.cassettes is not None:  # checked before anything is written: a bad call leaves nothing
        missing = [f"{a}/{i.id}.json" for i, a in jobs if not (plan.cassettes / a / f"{i.id}.json").is_file()]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise UserError(
                f"--cassettes {plan.cassettes} has no cassette for {', '.join(missing[:5])}{more}: record "
                "them (pse run --record) or leave those instances out (--instances)"
            )
    _open_folder(out)
    meta = _meta(plan, out)
    hidden_dir = _stage_hidden(plan.suite, out)
    hide = [*plan.suite.secret_paths, out]
    started = _runs_in_store(plan) | _started_runs(out)
    lock = asyncio.Lock()
    fatal: list[str] = []
    limits = plan.suite.config.limits.model_dump(exclude_none=True)
    executor = plan.executor or LocalExecutor(plan.concurrency)

    async def record(row: ResultRow) -> None:
        async with lock:
            _append(out / RESULTS_FILE, row.model_dump(mode="json"))
            _write_summary(plan, out, meta)
        if plan.on_row is not None:
            plan.on_row(row)

    works: list[WorkItem] = []
    pairs: dict[int, tuple[Instance, str, Settings]] = {}
    for instance, arm in jobs:
        cassette = plan.cassettes / arm / f"{instance.id}.json" if plan.cassettes is not None else None
        settings = arm_settings(plan.settings, arm, hide=hide, cassette=cassette)
        earlier = started.get((instance.id, arm))
        finished = _finished_trace(settings, earlier)
        if finished is not None:  # it ended before its row was written (a crash in between): judge it
            await record(await _judge(plan, instance, arm, settings, finished, hidden_dir, hide, wall=0.0))
            continue
        pairs[len(works)] = (instance, arm, settings)
        works.append(
            WorkItem(
                batch_id=None,
                item=len(works),
                task=plan.suite.config.task,
                inputs=dict(instance.inputs),
                settings=portable(settings),
                tags={"eval": plan.eval_id, "arm": arm, "instance": instance.id},
                files=dict(instance.files),
                limits=limits,
                resume=earlier,
                repo=str(plan.suite.repo) if plan.suite.repo is not None else None,
                base=(instance.ref or plan.suite.config.base) if plan.suite.repo is not None else None,
            )
        )
    begun: dict[int, float] = {}
    judging: list[asyncio.Task[None]] = []

    def on_started(work: WorkItem, run_id: str) -> None:
        instance, arm, _ = pairs[work.item]
        begun.setdefault(work.item, time.monotonic())
        _append(out / RUNS_FILE, {"instance": instance.id, "arm": arm, "run_id": run_id})
        if plan.on_start is not None:
            plan.on_start(instance.id, arm, run_id)

    async def judge(result: ItemResult) -> None:
        instance, arm, settings = pairs[result.item]
        wall = time.monotonic() - begun.get(result.item, time.monotonic())
        trace = trace_of(settings, result.run_id)
        if trace is None or (plan._cancelled is not None and result.cancelled):
            return  # cancelled: no result; the next run of this evaluation resumes it
        run_dir = settings.runs_dir.resolve() / str(result.run_id)
        await record(
            await _judge(
                plan, instance, arm, settings, (run_dir, trace), hidden_dir, hide, wall, result.error
            )
        )

    def on_result(result: ItemResult) -> None:
        if result.unstarted:  # it could not start: a setting, input or sandbox every run would trip on
            fatal.append(result.error or "the run could not start")
            plan.cancel(f"the evaluation stopped: {fatal[0]}")
            return
        judging.append(asyncio.ensure_future(judge(result)))

    await executor.run(works, on_result, plan._cancel_event, on_started)
    await asyncio.gather(*judging)
    summary = _write_summary(plan, out, meta)
    if fatal:
        raise UserError(f"the evaluation stopped: {fatal[0]}")
    return summary


def _runs_in_store(plan: EvalRun) -> dict[tuple[str, str], str]:
    """The newest run of each (instance, arm) the store has for this evaluation: a run whose start was
    never noted in runs.jsonl (its worker was elsewhere, the driver died) is found by its tags."""
    try:
        entries = open_store(plan.settings).entries(RunFilter(tags=(("eval", plan.eval_id),)))
    except PSEError:
        return {}  # no store to ask: runs.jsonl alone says what started
    found: dict[tuple[str, str], str] = {}
    for entry in reversed(entries):  # oldest first: the newest wins
        if "instance" in entry.tags and "arm" in entry.tags:
            found[(entry.tags["instance"], entry.tags["arm"])] = entry.run_id
    return found


def _open_folder(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    if out.is_symlink() or not out.is_dir():
        raise UserError(f"--out {out} is not a real directory")
    os.chmod(out, 0o700)  # the hidden checks' results: PSE's own, no tool command's


def _meta(plan: EvalRun, out: Path) -> dict[str, Any]:
    path = out / EVAL_FILE
    ids = [i.id for i in plan.instances]
    variants = list(dict.fromkeys(i.variant for i in plan.instances))
    mutations = {i.id: i.mutation.model_dump() for i in plan.instances if i.mutation is not None}
    if path.is_file():
        try:
            meta: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path} is not readable JSON ({exc}): pass another --out") from None
        if meta.get("suite") != plan.suite.name or meta.get("task") != plan.suite.config.task:
            raise UserError(
                f"--out {out} holds an evaluation of suite {meta.get('suite')!r} "
                f"(task {meta.get('task')!r}), not {plan.suite.name!r}: pass another --out"
            )
        if mutations and meta.get("seed", plan.seed) != plan.seed:
            raise UserError(
                f"--out {out} holds impossible instances mutated with --seed {meta.get('seed')}, not "
                f"{plan.seed}: pass the same seed, or another --out"
            )
        meta["arms"] = list(dict.fromkeys([*meta.get("arms", []), *plan.arms]))
        meta["instances"] = list(dict.fromkeys([*meta.get("instances", []), *ids]))
        meta["variants"] = list(dict.fromkeys([*meta.get("variants", [ORDINARY]), *variants]))
        if mutations:
            meta["seed"] = plan.seed
            meta["mutations"] = {**meta.get("mutations", {}), **mutations}
    else:
        meta = {
            "eval_id": out.name,
            "suite": plan.suite.name,
            "task": plan.suite.config.task,
            "description": plan.suite.config.description,
            "source": plan.suite.source,
            "arms": list(plan.arms),
            "instances": ids,
            "variants": variants,
            "created_at": utc_now(),
        }
        if mutations:
            meta["seed"] = plan.seed
            meta["mutations"] = mutations
    _write_json(path, meta)
    return meta


def _stage_hidden(suite: Suite, out: Path) -> Path | None:
    """The folder each hidden check gets as `{hidden}`: the suite's, or the built-in runner staged alone."""
    if not suite.runner:
        return suite.hidden_dir
    staged = out / "hidden"
    staged.mkdir(mode=0o700, exist_ok=True)
    for file in suite.runner:
        shutil.copy2(file, staged / file.name)
    return staged


def _started_runs(out: Path) -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    path = out / RUNS_FILE
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
                found[(str(data["instance"]), str(data["arm"]))] = str(data["run_id"])
            except (ValueError, KeyError, TypeError):
                continue
    return found


def _finished_trace(settings: Settings, run_id: str | None) -> tuple[Path, dict[str, Any]] | None:
    """The run folder and trace of `run_id` when it ended (and was not cancelled), else None."""
    if run_id is None:
        return None
    run_dir = settings.runs_dir.resolve() / run_id
    try:
        data: dict[str, Any] = json.loads((run_dir / "trace.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("outcome") is None or str(data.get("outcome_reason")).startswith("CANCELLED"):
        return None
    return run_dir, data


async def _judge(
    plan: EvalRun,
    instance: Instance,
    arm: str,
    settings: Settings,
    run: tuple[Path, dict[str, Any]],
    hidden_dir: Path | None,
    hide: Sequence[Path],
    wall: float,
    crash: str | None = None,
) -> ResultRow:
    """Run the hidden check on a finished run's workspace and make its row."""
    run_dir, trace = run
    if instance.variant == IMPOSSIBLE:
        hidden = impossible_check(trace.get("outcome"))
    else:
        hidden = await asyncio.to_thread(
            run_hidden_check,
            instance,
            run_dir / "workspace",
            settings,
            hidden_dir=hidden_dir,
            secret_paths=hide,
            timeout_s=plan.suite.config.hidden_check_timeout_s,
        )
    return result_row(
        plan.eval_id,
        instance.id,
        arm,
        trace,
        hidden,
        wall,
        crash,
        variant=instance.variant,
        mutation=instance.mutation,
    )


def _write_summary(plan: EvalRun, out: Path, meta: Mapping[str, Any]) -> EvalSummary:
    rows = latest_rows(read_rows(out))
    summary = summarize_rows(
        rows,
        eval_id=out.name,
        suite=str(meta["suite"]),
        task=str(meta["task"]),
        arms=list(meta.get("arms", plan.arms)),
        now=utc_now(),
    )
    _write_json(out / SUMMARY_FILE, summary.model_dump(mode="json"))
    try:
        from pse.evals._report import write_report
    except ImportError:  # pragma: no cover - the report module ships with this one
        return summary
    write_report(out, plan.dashboard_url)
    return summary


def _append(path: Path, data: Mapping[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(data, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
