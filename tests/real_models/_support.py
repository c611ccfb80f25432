"""What the real-model tests share: the runs' limits, their settings, and the figures they measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pse.config import Settings, load_settings
from pse.doctor import RunScore, score_run
from pse.local import LocalServer
from pse.trace import Trace

BUDGET: dict[str, Any] = {
    "model_max_tokens": 256,  # a plan, a small file or a verdict fit; a babbling model stops early
    "model_temperature": 0,  # greedy: the same figures on every run of the same build
    "model_timeout_s": 120,
    "model_max_retries": 1,
    "turns_per_cycle": 8,
    "max_partial_retries": 1,
    "max_fail_retries": 0,
    "format_retries": 1,
    "run_timeout_s": 100,
    "tool_output_limit": 3000,  # tool output is prompt: keep it well inside the 8k context
    "model_context_tokens": 8192,
}
"""The limits of every real-model run: a few retries, a turn cap and a run timeout keep CI bounded."""

FIGURES: list[dict[str, Any]] = []
"""What each run measured, in order; printed and saved at the end of the session."""


def local_settings(server: LocalServer, runs_dir: Path, model: str, **overrides: Any) -> Settings:
    """Settings of a run against the local server: every role on `model` unless overridden, `BUDGET`."""
    options = {"provider": "openai", "base_url": server.url, "model": model, "runs_dir": runs_dir}
    return load_settings(**{**options, **BUDGET, **overrides})


def record(config: str, models: str, trace: Trace) -> RunScore:
    """Score a finished run and keep its figures for the session's summary."""
    score = score_run(trace)
    wall = score.wall_s or 0.0
    speed = round(trace.tokens.completion / wall, 1) if wall > 0 else None
    FIGURES.append({"config": config, "models": models, **score.as_dict(), "completion_tokens_per_s": speed})
    return score
