"""What the real-model tests share: the figures each run measured, collected for the session summary."""

from __future__ import annotations

from typing import Any

from pse.doctor import RunScore, score_run
from pse.trace import Trace

FIGURES: list[dict[str, Any]] = []
"""What each run measured, in order; printed and saved at the end of the session."""


def record(config: str, models: str, trace: Trace) -> RunScore:
    """Score a finished run and keep its figures for the session's summary."""
    score = score_run(trace)
    wall = score.wall_s or 0.0
    speed = round(trace.tokens.completion / wall, 1) if wall > 0 else None
    FIGURES.append({"config": config, "models": models, **score.as_dict(), "completion_tokens_per_s": speed})
    return score
