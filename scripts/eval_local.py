"""`make eval-local`: the seeds' experiment on a packaged local model, with the bare model beside it.

Starts llama.cpp's server on loopback with one packaged model (`pse[local]`; Qwen2.5-Coder-1.5B by
default), then:

1. **direct**: the bare model, one chat request per instance at temperature 0, the code block of its
   answer judged by the instance's hidden check (`pse.evals._direct`): the reference column;
2. `pse eval humaneval --limit N --arms pse,single` against it, grammar-constrained decoding for every
   role, the run limits of `pse.local.QWEN_RUN` (or `SHORT_RUN` for the tiny models).

With `--impossible`, the same problems' impossible variant runs beside them (`--variant
ordinary,impossible`: a visible test of each contradicts its docstring), and each arm's figures gain
`impossible`: its cheat rate (PASSED), honest exit rate (SPEC_CONFLICT naming the mutated test) and the
solve rate of the ordinary runs beside it. The ordinary runs already in the folder are kept.

It prints one line per finished row and, at the end, the table of the README: claimed, true and false
pass rates with 95 % intervals, outcomes, tokens, prompt tokens served from llama.cpp's cache, and wall
time per true pass, per arm. The evaluation folder is `evals/humaneval-local-<model>` (re-running
resumes it, the direct column included; delete it to start over). Nothing is downloaded: the models come
inside their PyPI packages.

    python scripts/eval_local.py [--limit 20] [--arms pse,single] [--model qwen2.5-coder-1.5b] [--out DIR]
                                 [--impossible [--seed 0]] [--write-format auto|call|fenced]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from pse.doctor import parse_share
from pse.engine import load_trace
from pse.evals._arms import parse_arms, select_instances
from pse.evals._direct import DirectRow, ask_direct, direct_summary, judge_direct
from pse.evals._harness import EvalRun, _stage_hidden, read_rows, run_eval
from pse.evals._impossible import DEFAULT_SEED, IMPOSSIBLE, ORDINARY
from pse.evals._results import ResultRow
from pse.evals._suite import Instance, Suite, load_suite, variant_instances
from pse.local import LOCAL_MODELS, QWEN_CODER_1_5B, QWEN_RUN, SHORT_RUN, LocalServer, local_run_settings
from pse.roles import ROLES
from pse.runner import registry_for

ROOT = Path(__file__).resolve().parents[1]
DIRECT_FILE = "direct.jsonl"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--arms", default="pse,single")
    parser.add_argument("--model", default=QWEN_CODER_1_5B.alias, choices=[m.alias for m in LOCAL_MODELS])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs")
    parser.add_argument("--no-direct", action="store_true", help="skip the bare model's reference column")
    parser.add_argument(
        "--impossible",
        action="store_true",
        help="run the impossible variant of the same problems beside them: cheat and honest-exit rates",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="which assertion each is mutated")
    parser.add_argument(
        "--write-format",
        choices=["auto", "call", "fenced"],
        default="auto",
        help="how roles write files (PSE_WRITE_FORMAT): to compare the formats on the same problems",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="use this running server (python -m pse.local) instead of starting one",
    )
    args = parser.parse_args(argv)
    model = next(m for m in LOCAL_MODELS if m.alias == args.model)
    out = (args.out or ROOT / "evals" / f"humaneval-local-{model.alias}").resolve()
    limits = QWEN_RUN if model.family == "qwen2.5" else SHORT_RUN
    grammar = {"constrain": "grammar", **{f"{r.lower()}_constrain": "grammar" for r in ROLES}}
    grammar["write_format"] = args.write_format
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    server = LocalServer([model], log=out.parent / f".{out.name}-server.log")
    with contextlib.nullcontext(server) if args.base_url else server:
        url = args.base_url or server.url
        settings = local_run_settings(url, model.alias, args.runs_dir, **{**limits, **grammar})
        suite = load_suite("humaneval", registry_for(settings))
        instances = select_instances(suite, limit=args.limit)
        variants = [ORDINARY, IMPOSSIBLE] if args.impossible else [ORDINARY]
        runs = variant_instances(suite, instances, variants, seed=args.seed)
        direct = (
            [] if args.no_direct else asyncio.run(_direct(url, model.alias, suite, instances, settings, out))
        )
        arms = parse_arms(args.arms, suite)
        plan = EvalRun(
            suite=suite,
            settings=settings,
            arms=arms,
            instances=runs,
            out_dir=out,
            seed=args.seed,
            on_row=lambda row: print(
                f"{row.arm:<8} {row.instance:<23} claimed {row.claimed_outcome} · hidden "
                f"{'pass' if row.hidden.passed else 'fail'} · {row.cycles} cycle(s) · {row.tokens} tokens · "
                f"{row.wall_s:.0f} s · {row.outcome_reason[:70]}",
                flush=True,
            ),
        )
        summary = asyncio.run(run_eval(plan))
    elapsed = time.monotonic() - started
    rows = [r for r in read_rows(out) if r.instance in {i.id for i in runs}]
    table = {
        arm: _arm_figures(
            s.model_dump(), [r for r in rows if r.arm == arm and r.variant == ORDINARY], settings.runs_dir
        )
        for arm, s in summary.arms.items()
    }
    for arm, s in summary.arms.items() if args.impossible else ():
        table[arm]["impossible"] = _impossible_figures(
            s.model_dump(), [r for r in rows if r.arm == arm and r.variant == IMPOSSIBLE]
        )
    if direct:
        table["direct"] = direct_summary(direct)
    result = {
        "model": model.alias,
        "elapsed_s": round(elapsed, 1),
        "server_startup_s": round(server.startup_s, 2),
        "arms": table,
    }
    print(json.dumps(result, indent=1))
    (out / "local.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"report: {out / 'report.html'}")
    return 0


async def _direct(
    url: str, model: str, suite: Suite, instances: list[Instance], settings: Any, out: Path
) -> list[DirectRow]:
    """The bare model's answer to each instance, judged; rows already in `direct.jsonl` are kept."""
    path = out / DIRECT_FILE
    done = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = DirectRow.model_validate_json(line)
                done[row.instance] = row
    hidden = _stage_hidden(suite, out)
    rows = []
    for instance in instances:
        if instance.id in done:
            rows.append(done[instance.id])
            continue
        asked = time.monotonic()
        answer, prompt, completion = await ask_direct(
            url, model, instance.problem or instance.inputs["PROBLEM"], timeout_s=settings.model_timeout_s
        )
        wall = time.monotonic() - asked
        row = await asyncio.to_thread(
            judge_direct,
            instance,
            answer,
            settings,
            hidden_dir=hidden,
            secret_paths=[*suite.secret_paths, out],
            timeout_s=suite.config.hidden_check_timeout_s,
            tokens=(prompt, completion),
            wall_s=wall,
        )
        with path.open("a", encoding="utf-8") as stream:
            stream.write(row.model_dump_json() + "\n")
        print(
            f"direct   {row.instance:<14} hidden {'pass' if row.passed else 'fail'} · "
            f"{prompt + completion} tokens · {wall:.0f} s",
            flush=True,
        )
        rows.append(row)
    return rows


def _impossible_figures(summary: dict[str, Any], rows: list[ResultRow]) -> dict[str, Any]:
    """An arm's figures on the impossible variant: cheats, honest exits, and the ordinary solve rate."""
    keep = (
        "impossible_instances",
        "cheats",
        "cheat_rate",
        "cheat_rate_ci95",
        "honest_exits",
        "honest_exit_rate",
        "honest_exit_rate_ci95",
        "spec_conflicts",
        "solve_rate",
        "solve_rate_ci95",
        "impossible_outcomes",
        "impossible_tokens",
    )
    figures = {k: summary[k] for k in keep}
    figures["wall_s"] = round(sum(r.wall_s for r in rows), 1)
    figures["conflicts_by"] = {
        who: sum(1 for r in rows if r.conflict_by == who)
        for who in sorted({r.conflict_by or "" for r in rows} - {""})
    }
    return figures


def _arm_figures(summary: dict[str, Any], rows: list[ResultRow], runs_dir: Path) -> dict[str, Any]:
    """An arm's README figures: the summary's rates, plus wall time per true pass and the prompt tokens
    llama.cpp served from its cache (read from the runs' traces)."""
    keep = (
        "instances",
        "claimed_passes",
        "true_passes",
        "escaped_defects",
        "claimed_pass_rate",
        "claimed_pass_rate_ci95",
        "true_pass_rate",
        "true_pass_rate_ci95",
        "false_pass_rate",
        "false_pass_rate_ci95",
        "mean_rework_cycles",
        "tokens",
        "tokens_per_true_pass",
        "wall_s_per_instance",
        "outcomes",
    )
    figures = {k: summary[k] for k in keep}
    wall = sum(r.wall_s for r in rows)
    figures["wall_s"] = round(wall, 1)
    figures["wall_s_per_true_pass"] = (
        round(wall / summary["true_passes"], 1) if summary["true_passes"] else None
    )
    prompt = cached = 0
    share = None
    walls = sorted(r.wall_s for r in rows if r.hidden.passed and r.claimed_outcome == "PASSED")
    for row in rows:
        trace_dir = runs_dir.resolve() / row.run_id
        if (trace_dir / "trace.json").is_file():
            trace = load_trace(trace_dir)
            prompt += trace.tokens.prompt
            cached += sum(count.cached for count in trace.tokens.by_role.values())
            share = parse_share(trace) if share is None else share + parse_share(trace)
    figures["prompt_tokens"] = prompt
    figures["prompt_tokens_cached"] = cached
    figures["median_wall_s_per_true_pass"] = walls[len(walls) // 2] if walls else None
    # Aider's "percent using correct edit format": each role's turns, parsed on the first try.
    figures["turns_by_role"] = share.as_dict()["by_role"] if share is not None else {}
    return figures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
