"""The loop's limits: the few numbers a run is held to (turns, retries, steps, tokens, money and time)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoopLimits"]


@dataclass(frozen=True)
class LoopLimits:
    """What the engine may spend and repeat; the runner builds it from the settings (`PSE_*` names in
    brackets, which the reasons in a trace cite).

    Attributes:
        run_timeout_s: wall-clock limit of a run, seconds (PSE_RUN_TIMEOUT_S).
        turns_per_cycle: most agent turns in one cycle, tool turns included (PSE_TURNS_PER_CYCLE).
        format_retries: times a role is asked again, per phase, for what its final message owes
            (PSE_FORMAT_RETRIES).
        max_partial_retries: PARTIAL verdicts revised before a re-plan (PSE_MAX_PARTIAL_RETRIES).
        max_fail_retries: re-plans before the run is ESCALATED (PSE_MAX_FAIL_RETRIES).
        max_criterion_failures: times one criterion may fail before the run is ESCALATED
            (PSE_MAX_CRITERION_FAILURES).
        step_buffer_tokens: cap of what crosses from one cycle to the next (PSE_STEP_BUFFER_TOKENS).
        token_budget: most tokens a run may use (PSE_TOKEN_BUDGET).
        cost_budget: most money a run may cost; None: no limit (PSE_COST_BUDGET).
        max_steps: most steps one plan may hold (PSE_MAX_STEPS).
        max_step_retries: retries of one step before it re-plans (PSE_MAX_STEP_RETRIES).
        max_parallel_steps: independent steps run at the same time (PSE_MAX_PARALLEL_STEPS).
    """

    run_timeout_s: float
    turns_per_cycle: int
    format_retries: int
    max_partial_retries: int
    max_fail_retries: int
    max_criterion_failures: int
    step_buffer_tokens: int
    token_budget: int
    cost_budget: float | None
    max_steps: int
    max_step_retries: int
    max_parallel_steps: int
