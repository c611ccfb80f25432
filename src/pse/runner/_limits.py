"""The engine's limits, read from the settings in this one place (the engine never sees `Settings`)."""

from __future__ import annotations

from pse.config import Settings
from pse.engine import LoopLimits

__all__ = ["loop_limits"]


def loop_limits(settings: Settings) -> LoopLimits:
    """The limits a run is held to, as the settings (with the task's and the suite's overrides) set them."""
    return LoopLimits(
        run_timeout_s=settings.run_timeout_s,
        turns_per_cycle=settings.turns_per_cycle,
        format_retries=settings.format_retries,
        max_partial_retries=settings.max_partial_retries,
        max_fail_retries=settings.max_fail_retries,
        max_criterion_failures=settings.max_criterion_failures,
        step_buffer_tokens=settings.step_buffer_tokens,
        token_budget=settings.token_budget,
        cost_budget=settings.cost_budget,
        max_steps=settings.max_steps,
        max_step_retries=settings.max_step_retries,
        max_parallel_steps=settings.max_parallel_steps,
    )
