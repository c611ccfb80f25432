"""The report's figures as text: rates with their intervals, counts, money, and its tables' rows."""

from __future__ import annotations

from collections.abc import Callable

from pse.evals._results import ArmSummary

__all__ = ["ARM_FIGURES", "CHEAT_FIGURES", "DASH", "p_value"]


DASH = "—"
"""What an undefined figure (None) shows as."""


def _fixed(value: float | None, digits: int) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _rate(value: float | None, ci: tuple[float, float] | None) -> str:
    """`0.40 (0.22–0.61)`: a rate with its 95 % interval; — when undefined."""
    if value is None:
        return DASH
    return f"{value:.2f}" if ci is None else f"{value:.2f} ({ci[0]:.2f}–{ci[1]:.2f})"


def _count(value: float | None) -> str:
    return DASH if value is None else f"{round(value):,}"


def _money(value: float | None, currency: str) -> str:
    return DASH if value is None else f"{value:.4f} {currency}"


def p_value(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _outcomes(arm: ArmSummary) -> str:
    return " · ".join(f"{name} {n}" for name, n in arm.outcomes.items()) or DASH


def _rate_of(field: str) -> Callable[[ArmSummary], str]:
    return lambda arm: _rate(getattr(arm, field), getattr(arm, f"{field}_ci95"))


ARM_FIGURES: tuple[tuple[str, str, Callable[[ArmSummary], str]], ...] = (
    ("instances", "instances", lambda a: str(a.instances)),
    ("claimed_pass_rate", "claimed pass rate", _rate_of("claimed_pass_rate")),
    ("true_pass_rate", "true pass rate", _rate_of("true_pass_rate")),
    ("false_pass_rate", "false pass rate (of claimed)", _rate_of("false_pass_rate")),
    ("escaped_defects", "escaped defects", lambda a: str(a.escaped_defects)),
    ("first_pass_rate", "first pass rate", _rate_of("first_pass_rate")),
    ("mean_rework_cycles", "mean rework cycles", lambda a: _fixed(a.mean_rework_cycles, 2)),
    ("handoff_failure_rate", "handoff failure rate", _rate_of("handoff_failure_rate")),
    ("unauthorized_call_rate", "unauthorized call rate", _rate_of("unauthorized_call_rate")),
    ("tokens", "tokens", lambda a: f"{a.tokens:,}"),
    ("tokens_per_true_pass", "tokens per true pass", lambda a: _count(a.tokens_per_true_pass)),
    ("cost", "cost", lambda a: _money(a.cost, a.currency)),
    ("cost_per_true_pass", "cost per true pass", lambda a: _money(a.cost_per_true_pass, a.currency)),
    ("wall_s_per_instance", "wall s per instance", lambda a: _fixed(a.wall_s_per_instance, 1)),
    ("outcomes", "outcomes", _outcomes),
    ("hidden_check_errors", "hidden checks that could not run", lambda a: str(a.hidden_check_errors)),
)
"""The arms table, row by row: (key, label, figure). The dashboard's eval page shows the same rows."""

CHEAT_FIGURES: tuple[tuple[str, str, Callable[[ArmSummary], str]], ...] = (
    ("impossible_instances", "impossible instances", lambda a: str(a.impossible_instances)),
    ("cheat_rate", "cheat rate (PASSED)", _rate_of("cheat_rate")),
    ("cheats", "cheats", lambda a: str(a.cheats)),
    ("honest_exit_rate", "honest exit rate (SPEC_CONFLICT naming the test)", _rate_of("honest_exit_rate")),
    ("honest_exits", "honest exits", lambda a: str(a.honest_exits)),
    ("spec_conflicts", "SPEC_CONFLICT exits (any test named)", lambda a: str(a.spec_conflicts)),
    ("solve_rate", "solve rate (ordinary variant)", _rate_of("solve_rate")),
    (
        "impossible_outcomes",
        "outcomes (impossible)",
        lambda a: " · ".join(f"{k} {n}" for k, n in a.impossible_outcomes.items()) or DASH,
    ),
    ("impossible_tokens", "tokens (impossible)", lambda a: f"{a.impossible_tokens:,}"),
)
"""The impossible variant's table (shown when an evaluation has impossible instances): the same rows on
the dashboard's eval page."""
