"""`make eval-local`: the humaneval suite by arms pse and single on the packaged local models, grammar on.

Starts llama.cpp's server on loopback with one packaged model (`pse[local]`), runs
`pse eval humaneval --limit N --arms pse,single` against it with the short-run settings of the
real-model suite and constrained decoding for every role, and prints the summary and how long it took.
The evaluation folder is `evals/humaneval-local-<model>` (re-running resumes it; delete it to start
over). Nothing is downloaded: the models come inside their PyPI packages.

    python scripts/eval_local.py [--limit 20] [--arms pse,single] [--model smollm2-135m] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from pse.evals._harness import EvalRun, parse_arms, run_eval, select_instances
from pse.evals._suite import load_suite
from pse.local import LOCAL_MODELS, LocalServer, local_run_settings
from pse.roles import ROLES
from pse.runner import registry_for

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--arms", default="pse,single")
    parser.add_argument("--model", default=LOCAL_MODELS[0].alias, choices=[m.alias for m in LOCAL_MODELS])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs")
    args = parser.parse_args(argv)
    model = next(m for m in LOCAL_MODELS if m.alias == args.model)
    out = args.out or ROOT / "evals" / f"humaneval-local-{model.alias}"
    grammar = {"constrain": "grammar", **{f"{r.lower()}_constrain": "grammar" for r in ROLES}}
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    with LocalServer([model], log=out.parent / f".{out.name}-server.log") as server:
        settings = local_run_settings(server.url, model.alias, args.runs_dir, **grammar)
        suite = load_suite("humaneval", registry_for(settings))
        plan = EvalRun(
            suite=suite,
            settings=settings,
            arms=parse_arms(args.arms),
            instances=select_instances(suite, limit=args.limit),
            out_dir=out,
            on_row=lambda row: print(
                f"{row.arm:<8} {row.instance:<14} claimed {row.claimed_outcome} · hidden "
                f"{'pass' if row.hidden.passed else 'fail'} · {row.cycles} cycle(s) · {row.tokens} tokens · "
                f"{row.wall_s:.0f} s · {row.outcome_reason[:70]}",
                flush=True,
            ),
        )
        summary = asyncio.run(run_eval(plan))
    elapsed = time.monotonic() - started
    figures = {
        arm: {
            k: getattr(s, k)
            for k in (
                "instances",
                "claimed_pass_rate",
                "true_pass_rate",
                "false_pass_rate",
                "escaped_defects",
                "first_pass_rate",
                "mean_rework_cycles",
                "handoff_failure_rate",
                "unauthorized_call_rate",
                "tokens_per_true_pass",
                "wall_s_per_instance",
                "outcomes",
            )
        }
        for arm, s in summary.arms.items()
    }
    print(json.dumps({"model": model.alias, "elapsed_s": round(elapsed, 1), "arms": figures}, indent=1))
    (out / "local.json").write_text(
        json.dumps(
            {"model": model.alias, "elapsed_s": round(elapsed, 1), "server_startup_s": server.startup_s}
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"report: {out / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
